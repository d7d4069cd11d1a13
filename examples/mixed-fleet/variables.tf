variable "v100_model" {
  type        = string
  default     = "Tesla V100-PCIE-32GB"
  description = "The V100 nodes' GPU model, exactly as nvidia-smi names it."
}

variable "a100_model" {
  type        = string
  default     = "NVIDIA A100-SXM4-40GB"
  description = "The MIG nodes' GPU model, exactly as nvidia-smi names it: one with MIG profiles in the table (A100, A30, H100)."
}

variable "wait_for" {
  type        = string
  default     = "ready"
  description = "What apply waits for: \"ready\", or \"scheduled\" (every pod has its slice and a node; the local cluster's simulated nodes run no containers)."
}
