output "service_address" {
  description = "Where agents call Ollama, inside the cluster."
  value       = module.ollama.service_address
}

output "claim" {
  description = "The ResourceClaim Ollama's pod got."
  value       = module.ollama.claim
}

output "slice" {
  description = "The slice (device) allocated to it."
  value       = module.ollama.device
}

output "node" {
  description = "The node it runs on."
  value       = module.ollama.node
}

output "package_memory" {
  description = "GPU memory of each package's slice."
  value = {
    (gpuslice_package.v100_8gi.name)  = gpuslice_package.v100_8gi.memory
    (gpuslice_package.v100_16gi.name) = gpuslice_package.v100_16gi.memory
    (gpuslice_package.v100_32gi.name) = gpuslice_package.v100_32gi.memory
  }
}
