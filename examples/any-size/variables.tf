variable "gpu_model" {
  type        = string
  default     = "Tesla V100-PCIE-32GB"
  description = "GPU model exactly as nvidia-smi names it."
}

variable "wait_for" {
  type        = string
  default     = "ready"
  description = "What apply waits for: \"ready\", or \"scheduled\" (every pod has its slice and a node; the local cluster's simulated nodes run no containers)."
}
