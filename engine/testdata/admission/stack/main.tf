# The stack the admission test applies with the engine: a platform with its
# own tenant label (so the policies bind only the test's namespaces in the
# control plane the engine tests share), three packages, and a quota that
# grants two of them and names the tenant users.
resource "gpuslice_platform" "this" {
  namespace    = "adm-platform"
  tenant_label = "admission-test.gpuslice.dev/tenant"
}

resource "gpuslice_package" "small" {
  name      = "adm-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_package" "medium" {
  name      = "adm-16gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 50
}

resource "gpuslice_package" "whole" {
  name      = "adm-32gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 100
}

resource "gpuslice_quota" "tenant" {
  namespace = "adm-tenant"
  slices = {
    (gpuslice_package.small.name)  = 2
    (gpuslice_package.medium.name) = 1
    (gpuslice_package.whole.name)  = 0
  }
  cpu_requests    = "8"
  memory_requests = "32Gi"
  tenant_users    = ["alice"]
  tenant_groups   = ["team-adm"]
}
