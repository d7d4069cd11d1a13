# A quarter of a V100-32GB: 8 GiB of GPU memory and 25 % of its compute,
# pre-cut on every GPU.
resource "gpuslice_package" "small" {
  name      = "v100-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

# Any size: 6 GiB and 20 % of a V100, cut when a pod claims it. Needs the
# node plugins' any-size devices (gpuslice_platform any_size = true).
resource "gpuslice_package" "seven_b_4bit" {
  name          = "v100-6gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "6Gi"
  compute_share = 20
}

# Time-sliced: four pods share each V100 whole. Not isolated: nothing
# limits one pod's memory or time. Needs time_slicing = true.
resource "gpuslice_package" "notebooks" {
  name      = "v100-shared"
  gpu_model = "Tesla V100-PCIE-32GB"
  sharing   = "time-sliced"
  replicas  = 4
}

# MIG: one 1g.5gb instance of an A100-40GB (4864 MiB, 1/7 of its compute),
# partitioned by the GPU itself. The A100s must be in MIG mode with 1g.5gb
# instances created.
resource "gpuslice_package" "a100_small" {
  name        = "a100-1g"
  gpu_model   = "NVIDIA A100-SXM4-40GB"
  mig_profile = "1g.5gb"
}
