output "slices" {
  description = "Each package's slice and what holds it: memory, compute share and isolation."
  value = {
    for p in [gpuslice_package.v100_quarter, gpuslice_package.v100_half, gpuslice_package.a100_small, gpuslice_package.a100_large] :
    p.name => "${p.memory}, ${p.compute_share} % compute, ${p.mig_profile != null ? "MIG ${p.mig_profile}: hardware isolation" : "software isolation"}"
  }
}

output "devices" {
  description = "The device each workload's first pod got: a V100 partition or an A100 MIG instance."
  value = {
    chat         = gpuslice_workload.chat.device
    chat_staging = gpuslice_workload.chat_staging.device
    research     = gpuslice_workload.research.device
    evals        = gpuslice_workload.evals.device
  }
}
