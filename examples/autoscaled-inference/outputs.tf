output "service_address" {
  description = "Where agents call Ollama, inside the cluster; the Service spreads calls over the replicas. How many replicas wait for a slice, and why, is the workload's reason (tofu state show gpuslice_workload.ollama, or gpuslice status)."
  value       = gpuslice_workload.ollama.service_address
}
