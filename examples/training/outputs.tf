output "phase" {
  description = "Running, Pending, Succeeded or Failed."
  value       = gpuslice_workload.ddp.phase
}

output "reason" {
  description = "Why the job is not running yet, e.g. which workers of a partly scheduled gang wait and for what."
  value       = gpuslice_workload.ddp.reason
}

output "claim" {
  description = "The ResourceClaim of worker 0's pod."
  value       = gpuslice_workload.ddp.claim
}

output "devices" {
  description = "The GPUs (devices) allocated to that worker."
  value       = gpuslice_workload.ddp.device
}
