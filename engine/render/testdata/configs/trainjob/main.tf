# A distributed training job rendered as Kubeflow Trainer's TrainJob on a
# TrainingRuntime of its own: three nodes with two whole GPUs each (two
# processes per node), no headless Service and no rendezvous environment
# (Trainer makes both).
resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "whole" {
  name      = "a100-whole"
  gpu_model = "NVIDIA A100-SXM4-80GB"
  fraction  = 100
}

resource "gpuslice_quota" "research" {
  namespace       = "research"
  slices          = { (gpuslice_package.whole.name) = 6 }
  cpu_requests    = "16"
  memory_requests = "128Gi"
}

resource "gpuslice_workload" "ddp" {
  namespace         = gpuslice_quota.research.namespace
  name              = "ddp"
  package           = gpuslice_package.whole.name
  kind              = "job"
  workers           = 3
  gpus_per_pod      = 2
  training_operator = "trainjob"
  labels            = { team = "vision" }
  wait_for          = "scheduled"
  container {
    image          = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
    command        = ["torchrun", "/workspace/train.py"]
    env            = { NCCL_DEBUG = "INFO" }
    cpu_request    = "4"
    memory_request = "32Gi"
  }
}
