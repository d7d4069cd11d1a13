output "service_address" {
  description = "Where agents call the model, inside the cluster."
  value       = gpuslice_workload.llm.service_address
}

output "claim" {
  description = "The first replica's ResourceClaim."
  value       = gpuslice_workload.llm.claim
}

output "device" {
  description = "The slice (device) the first replica got."
  value       = gpuslice_workload.llm.device
}

output "node" {
  description = "The node the first replica runs on."
  value       = gpuslice_workload.llm.node
}

output "phase" {
  description = "Running, Pending, Succeeded or Failed."
  value       = gpuslice_workload.llm.phase
}

output "reason" {
  description = "Why it is not running yet, with what to do."
  value       = gpuslice_workload.llm.reason
}
