# Cluster-wide settings: the slice sizes node plugins offer and the tenant label.
resource "gpuslice_platform" "this" {
  fractions          = [25, 50, 100]
  admission_policies = true
}
