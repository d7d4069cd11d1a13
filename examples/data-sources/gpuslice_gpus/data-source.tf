# Every GPU the node plugins publish, e.g. to pick a package's gpu_model.
data "gpuslice_gpus" "all" {}

output "gpu_models" {
  value = distinct([for g in data.gpuslice_gpus.all.gpus : g.model])
}

# GPUs taken out of service, and the slices still on them: failing ones
# (their node plugin's gpuslice.dev/unhealthy taint) and drained ones.
output "gpus_out_of_service" {
  value = {
    for g in data.gpuslice_gpus.all.gpus : "${g.node}/${g.index}" => {
      why    = g.health == "unhealthy" ? g.health_reason : g.drained
      slices = g.slices
    } if g.health == "unhealthy" || g.drained != null
  }
}
