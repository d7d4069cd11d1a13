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
  description = "What apply waits for. The local demo's simulated nodes run no containers, so it uses \"scheduled\"."
}
