# team-c runs slice-check (from the local registry) on an 8 GiB and a
# 16 GiB slice, applied with the gpuslice CLI: what a CUDA program sees of
# its slice, printed from inside the container.
resource "gpuslice_package" "check_8gi" {
  name      = "v100-8gi-check"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_package" "check_16gi" {
  name      = "v100-16gi-check"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 50
}

resource "gpuslice_quota" "team_c" {
  namespace = "team-c"
  slices = {
    (gpuslice_package.check_8gi.name)  = 1
    (gpuslice_package.check_16gi.name) = 1
  }
  cpu_requests    = "1"
  memory_requests = "1Gi"
}

resource "gpuslice_workload" "check_8gi" {
  namespace = gpuslice_quota.team_c.namespace
  name      = "check-8gi"
  package   = gpuslice_package.check_8gi.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = "registry.gpuslice.test/slice-check:1"
    command        = ["sh", "-c", "nvidia-smi; exec slice-check --sleep"]
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}

resource "gpuslice_workload" "check_16gi" {
  namespace = gpuslice_quota.team_c.namespace
  name      = "check-16gi"
  package   = gpuslice_package.check_16gi.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = "registry.gpuslice.test/slice-check:1"
    command        = ["sh", "-c", "nvidia-smi; exec slice-check --sleep"]
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
