variable "namespace" {
  type        = string
  description = "Tenant namespace; it needs a gpuslice_quota granting the package."
}

variable "name" {
  type        = string
  default     = "ollama"
  description = "Name of the workload, its Service, claim template and model volume."
}

variable "package" {
  type        = string
  description = "Package whose slice the runtime gets, e.g. gpuslice_package.v100_8gi.name."
}

variable "model" {
  type        = string
  default     = "llama3.2:3b"
  description = "Model to preload and serve (checked against the slice at plan time)."
}

variable "context_length" {
  type        = number
  default     = 16384
  description = "Context window in tokens. Ollama's default, 4096, silently truncates agent prompts with tool definitions (~15,000 tokens); 16384 fits llama3.2:3b on an 8 GiB slice."
}

variable "image" {
  type        = string
  default     = "ollama/ollama:0.24.0"
  description = "Ollama image, pinned: later releases have been seen failing on V100 (compute capability 7.0)."
}

variable "memory_request" {
  type        = string
  default     = "2Gi"
  description = "Container RAM request (host memory, separate from the slice)."
}

variable "memory_limit" {
  type        = string
  default     = "4Gi"
  description = "Container RAM limit. Ollama loads models through host memory: 512Mi gets it OOMKilled (exit 137)."
}

variable "cpu_request" {
  type        = string
  default     = "1"
  description = "CPU request; counts against the namespace's pooled quota."
}

variable "cpu_limit" {
  type        = string
  default     = "4"
  description = "CPU limit."
}

variable "model_volume_size" {
  type        = string
  default     = "20Gi"
  description = "Persistent volume for /root/.ollama, so models survive pod restarts."
}

variable "storage_class" {
  type        = string
  default     = null
  description = "StorageClass of the model volume; null uses the cluster default."
}

variable "replicas" {
  type        = number
  default     = 1
  description = "Replicas; each takes one slice."
}

variable "wait_for" {
  type        = string
  default     = "ready"
  description = "What apply waits for: ready, scheduled or none."
}

variable "timeout" {
  type        = string
  default     = "10m"
  description = "How long apply waits."
}
