# Several whole GPUs per pod, and a distributed training job: an indexed Job
# of three workers with two GPUs each and its headless Service.
resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "whole" {
  name      = "a100-whole"
  gpu_model = "NVIDIA A100-SXM4-80GB"
  fraction  = 100
}

resource "gpuslice_quota" "research" {
  namespace       = "research"
  slices          = { (gpuslice_package.whole.name) = 10 }
  cpu_requests    = "32"
  memory_requests = "256Gi"
}

resource "gpuslice_workload" "finetune" {
  namespace    = gpuslice_quota.research.namespace
  name         = "finetune"
  package      = gpuslice_package.whole.name
  kind         = "job"
  gpus_per_pod = 4
  wait_for     = "scheduled"
  container {
    image          = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
    command        = ["python", "/workspace/finetune.py"]
    cpu_request    = "8"
    memory_request = "64Gi"
  }
}

resource "gpuslice_workload" "ddp" {
  namespace    = gpuslice_quota.research.namespace
  name         = "ddp"
  package      = gpuslice_package.whole.name
  kind         = "job"
  workers      = 3
  gpus_per_pod = 2
  wait_for     = "scheduled"
  container {
    image          = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
    command        = ["torchrun", "/workspace/train.py"]
    env            = { NCCL_DEBUG = "INFO" }
    cpu_request    = "4"
    memory_request = "32Gi"
  }
}
