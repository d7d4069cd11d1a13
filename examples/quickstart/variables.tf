variable "node_plugin_image" {
  type        = string
  description = "The node plugin's image as `make image-push IMAGE=<registry>/gpuslice/gpuslice-nodeplugin:0.1.0` printed it, pinned by digest."
}

variable "driver_root" {
  type        = string
  default     = "/"
  description = "Where the NVIDIA driver is on the GPU nodes: / on the host, /run/nvidia/driver with NVIDIA's driver container."
}

variable "simulated_gpus" {
  type        = string
  default     = null
  description = "Simulated GPUs for a cluster without any (the local cluster: v100-32gb:1); leave unset on GPU nodes."
}

variable "node_plugin_env" {
  type        = map(string)
  default     = null
  description = "Extra environment of the node plugin, e.g. where the API server is when nodes cannot reach its Service address (the local cluster)."
}

variable "gpu_model" {
  type        = string
  default     = "Tesla V100-PCIE-32GB"
  description = "GPU model exactly as nvidia-smi names it."
}

variable "context_length" {
  type        = number
  default     = 16384
  description = "Ollama's context window. 131072 does not fit an 8 GiB slice: plan says so."
}

variable "wait_for" {
  type        = string
  default     = "ready"
  description = "What apply waits for. The local demo uses \"scheduled\": Ollama's image cannot be pulled there."
}
