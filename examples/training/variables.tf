variable "gpu_model" {
  type        = string
  default     = "Tesla V100-PCIE-32GB"
  description = "GPU model exactly as nvidia-smi names it."
}

variable "granted_gpus" {
  type        = number
  default     = 2
  description = "Whole GPUs the research namespace may hold at once."
}

variable "workers" {
  type        = number
  default     = 2
  description = "Training pods (torchrun nodes). More than granted_gpus / gpus_per_worker and plan fails: a gang that only partly fits would deadlock."
}

variable "gpus_per_worker" {
  type        = number
  default     = 1
  description = "Whole GPUs per worker, all on its node (torchrun's --nproc_per_node)."
}

variable "wait_for" {
  type        = string
  default     = "ready"
  description = "What apply waits for: \"ready\" (the Job completed) or \"scheduled\" (every worker has its GPUs; the local cluster's simulated nodes run no containers)."
}

variable "training_operator" {
  type        = string
  default     = null
  description = "Unset: an indexed Job and a headless Service, no operator needed. \"trainjob\": a Kubeflow Trainer v2 TrainJob (on a TrainingRuntime of its own) instead, where Trainer is installed. \"pytorchjob\": the Kubeflow Training Operator's PyTorchJob, where that operator still runs. Either operator then sets the same rendezvous variables."
}
