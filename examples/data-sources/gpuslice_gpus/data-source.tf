# Every GPU the node plugins publish, e.g. to pick a package's gpu_model.
data "gpuslice_gpus" "all" {}

output "gpu_models" {
  value = distinct([for g in data.gpuslice_gpus.all.gpus : g.model])
}
