output "devices" {
  description = "The device each workload's first pod got: a share of its GPU's any-size or time-sliced device."
  value = {
    small = gpuslice_workload.small.device
    large = gpuslice_workload.large.device
    evals = gpuslice_workload.evals.device
  }
}

output "slices" {
  description = "Each package's slice: memory (a hard limit for isolated packages) and compute share."
  value = {
    for p in [gpuslice_package.small, gpuslice_package.large, gpuslice_package.evals] :
    p.name => "${p.memory}, ${p.compute_share} % compute"
  }
}
