# The stack the admission test applies with the engine: a platform with its
# own tenant label (so the policies bind only the test's namespaces in the
# control plane the engine tests share), eleven packages of every kind, and a quota that
# grants some of them and names the tenant users.
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

# Whole GPUs the tenant is granted none of, also by the extended resource
# gpuslice.dev/adm-32gi.
resource "gpuslice_package" "whole" {
  name                   = "adm-32gi"
  gpu_model              = "Tesla V100-PCIE-32GB"
  fraction               = 100
  extended_resource_name = "gpuslice.dev/adm-32gi"
}

# Requested by pods as the extended resource gpuslice.dev/adm-l4 (one each);
# the scheduler makes the claim.
resource "gpuslice_package" "l4" {
  name                   = "adm-l4"
  gpu_model              = "NVIDIA L4"
  fraction               = 25
  extended_resource_name = "gpuslice.dev/adm-l4"
}

# Not granted to the tenant: a pod asking for it by its implicit extended
# resource name (deviceclass.resource.kubernetes.io/adm-l4-half) is refused.
resource "gpuslice_package" "l4_half" {
  name      = "adm-l4-half"
  gpu_model = "NVIDIA L4"
  fraction  = 50
}

# Whole GPUs, granted three: claims, and pods by the extended resource
# gpuslice.dev/adm-l4-whole or the implicit name, may ask for up to three.
resource "gpuslice_package" "l4_whole" {
  name                   = "adm-l4-whole"
  gpu_model              = "NVIDIA L4"
  fraction               = 100
  extended_resource_name = "gpuslice.dev/adm-l4-whole"
}

# Any size: 6 GiB and 20 % of a V100, cut from its any-size device; and a
# larger one the tenant is not granted.
resource "gpuslice_package" "any" {
  name          = "adm-6gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "6Gi"
  compute_share = 20
}

resource "gpuslice_package" "any_large" {
  name          = "adm-12gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "12Gi"
  compute_share = 40
}

# Time-sliced: four slices share each V100 whole, not isolated.
resource "gpuslice_package" "shared" {
  name      = "adm-ts"
  gpu_model = "Tesla V100-PCIE-32GB"
  sharing   = "time-sliced"
  replicas  = 4
}

# MIG: one 1g.5gb instance of an A100, isolated by the GPU; and a 3g.20gb
# the tenant is not granted.
resource "gpuslice_package" "mig" {
  name                   = "adm-mig-1g"
  gpu_model              = "NVIDIA A100-SXM4-40GB"
  mig_profile            = "1g.5gb"
  extended_resource_name = "gpuslice.dev/adm-mig-1g"
}

resource "gpuslice_package" "mig_large" {
  name        = "adm-mig-3g"
  gpu_model   = "NVIDIA A100-SXM4-40GB"
  mig_profile = "3g.20gb"
}

resource "gpuslice_quota" "tenant" {
  namespace = "adm-tenant"
  slices = {
    (gpuslice_package.small.name)    = 2
    (gpuslice_package.medium.name)   = 1
    (gpuslice_package.whole.name)    = 0
    (gpuslice_package.l4.name)       = 2
    (gpuslice_package.l4_whole.name) = 3
    (gpuslice_package.any.name)      = 2
    (gpuslice_package.shared.name)   = 1
    (gpuslice_package.mig.name)      = 2
  }
  cpu_requests    = "8"
  memory_requests = "32Gi"
  tenant_users    = ["alice"]
  tenant_groups   = ["team-adm"]
}
