# A quarter of a V100-32GB: 8 GiB of GPU memory and 25 % of its compute.
resource "gpuslice_package" "small" {
  name      = "v100-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}
