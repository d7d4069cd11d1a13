# gpuslice packages of any size: slices cut from a GPU by memory and compute
# share when a pod claims them (DRA consumable capacity), not pre-cut
# fractions — 6 GiB and 20 % for a 7B model at 4-bit, 20 GiB and 60 % for
# an 8B one with a long context on the same V100 — and a time-sliced
# package for short evaluation jobs, where four pods share a GPU whole and
# nothing holds them apart.
#
# The platform's node plugins must offer the any-size and time-sliced
# devices (gpuslice_platform any_size = true, time_slicing = true); plan
# fails, naming that setting, when the nodes do not.
#
#   tofu init && tofu apply      # or: gpuslice apply
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

provider "gpuslice" {}

# Held to 6 GiB (allocations past it fail, nvidia-smi shows 6144 MiB) and
# paced to 20 % of the GPU's time.
resource "gpuslice_package" "small" {
  name          = "v100-6gi"
  gpu_model     = var.gpu_model
  memory        = "6Gi"
  compute_share = 20
}

resource "gpuslice_package" "large" {
  name          = "v100-20gi"
  gpu_model     = var.gpu_model
  memory        = "20Gi"
  compute_share = 60
}

# Not isolated: each of the four pods on a GPU sees all of its memory and
# may use all of it; plan says so.
resource "gpuslice_package" "evals" {
  name      = "v100-shared"
  gpu_model = var.gpu_model
  sharing   = "time-sliced"
  replicas  = 4
}

resource "gpuslice_quota" "inference" {
  namespace = "inference"
  slices = {
    (gpuslice_package.small.name) = 1
    (gpuslice_package.large.name) = 1
    (gpuslice_package.evals.name) = 2
  }
  cpu_requests    = "8"
  memory_requests = "32Gi"
}

resource "gpuslice_workload" "small" {
  namespace = gpuslice_quota.inference.namespace
  name      = "qwen-7b"
  package   = gpuslice_package.small.name
  wait_for  = var.wait_for
  model {
    name           = "qwen2.5:7b"
    context_length = 8192
  }
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "8Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = "8192" }
    port {
      container_port = 11434
    }
  }
  model_volume {
    size       = "10Gi"
    mount_path = "/root/.ollama"
  }
}

resource "gpuslice_workload" "large" {
  namespace = gpuslice_quota.inference.namespace
  name      = "llama-8b"
  package   = gpuslice_package.large.name
  wait_for  = var.wait_for
  model {
    name           = "llama3.1:8b"
    context_length = 32768
  }
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "12Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = "32768" }
    port {
      container_port = 11434
    }
  }
  model_volume {
    size       = "20Gi"
    mount_path = "/root/.ollama"
  }
}

# Two evaluation runs at once, each on a time-sliced share: they see the
# whole GPU and must leave room for each other themselves.
resource "gpuslice_workload" "evals" {
  namespace = gpuslice_quota.inference.namespace
  name      = "evals"
  package   = gpuslice_package.evals.name
  kind      = "job"
  replicas  = 2
  wait_for  = var.wait_for
  container {
    image          = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
    command        = ["python", "-c", "import torch; x = torch.randn(4096, 4096, device='cuda'); print((x @ x).sum().item())"]
    cpu_request    = "500m"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
  }
}
