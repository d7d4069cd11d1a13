variable "gpu_model" {
  type        = string
  default     = "Tesla V100-PCIE-32GB"
  description = "GPU model exactly as nvidia-smi names it."
}

variable "model" {
  type        = string
  default     = "llama3.2:3b"
  description = "The model every replica serves."
}

variable "context_length" {
  type        = number
  default     = 16384
  description = "Ollama's context window; plan checks that it fits the slice."
}

variable "max_replicas" {
  type        = number
  default     = 3
  description = "Most replicas the autoscaler starts; the quota grants as many slices."
}

variable "wait_for" {
  type        = string
  default     = "ready"
  description = "What apply waits for. The local cluster uses \"scheduled\": its nodes run no containers."
}
