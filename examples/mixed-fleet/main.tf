# A mixed fleet in one configuration: V100 nodes sliced in software
# (fractions, held by the shim) and A100 nodes in MIG mode (instances
# partitioned by the GPU itself), shared by two teams with quotas on both.
#
# The A100s must be in MIG mode with 1g.5gb and 3g.20gb instances created
# (static MIG), for example seven 1g.5gb on one GPU and two 3g.20gb on
# another:
#
#   nvidia-smi -i 0 -mig 1 && nvidia-smi mig -i 0 -cgi 1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb,1g.5gb -C
#   nvidia-smi -i 1 -mig 1 && nvidia-smi mig -i 1 -cgi 3g.20gb,3g.20gb -C
#
# Plan fails on a workload whose MIG profile no node publishes, saying
# what the nodes have.
#
#   tofu init && tofu apply      # or: gpuslice apply
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

provider "gpuslice" {}

# Software slices of the V100s: the memory is a hard limit the shim holds
# (allocations past it fail), the compute a cooperative share.
resource "gpuslice_package" "v100_quarter" {
  name      = "v100-8gi"
  gpu_model = var.v100_model
  fraction  = 25
}

resource "gpuslice_package" "v100_half" {
  name      = "v100-16gi"
  gpu_model = var.v100_model
  fraction  = 50
}

# MIG instances of the A100s: memory and compute guaranteed by the GPU
# (4864 MiB and 1 of 7 compute slices; 19968 MiB and 3 of 7).
resource "gpuslice_package" "a100_small" {
  name        = "a100-1g"
  gpu_model   = var.a100_model
  mig_profile = "1g.5gb"
}

resource "gpuslice_package" "a100_large" {
  name        = "a100-3g"
  gpu_model   = var.a100_model
  mig_profile = "3g.20gb"
}

# The chat team: a small model on a MIG instance, isolated from its
# neighbours by the hardware, and a V100 quarter for its staging copy.
resource "gpuslice_quota" "chat" {
  namespace = "team-chat"
  slices = {
    (gpuslice_package.a100_small.name)   = 2
    (gpuslice_package.v100_quarter.name) = 1
  }
  cpu_requests    = "4"
  memory_requests = "16Gi"
}

# The research team: an 8B model with a long context on a 3g.20gb
# instance, and V100 halves for batch evaluation.
resource "gpuslice_quota" "research" {
  namespace = "team-research"
  slices = {
    (gpuslice_package.a100_large.name) = 1
    (gpuslice_package.v100_half.name)  = 2
  }
  cpu_requests    = "8"
  memory_requests = "32Gi"
}

resource "gpuslice_workload" "chat" {
  namespace = gpuslice_quota.chat.namespace
  name      = "chat"
  package   = gpuslice_package.a100_small.name
  wait_for  = var.wait_for
  model {
    name           = "llama3.2:3b"
    context_length = 8192
  }
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "6Gi"
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

resource "gpuslice_workload" "chat_staging" {
  namespace = gpuslice_quota.chat.namespace
  name      = "chat-staging"
  package   = gpuslice_package.v100_quarter.name
  wait_for  = var.wait_for
  model {
    name           = "llama3.2:3b"
    context_length = 8192
  }
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "6Gi"
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

resource "gpuslice_workload" "research" {
  namespace = gpuslice_quota.research.namespace
  name      = "llama-8b"
  package   = gpuslice_package.a100_large.name
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

resource "gpuslice_workload" "evals" {
  namespace = gpuslice_quota.research.namespace
  name      = "evals"
  package   = gpuslice_package.v100_half.name
  kind      = "job"
  replicas  = 2
  wait_for  = var.wait_for
  container {
    image          = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
    command        = ["python", "-c", "import torch; x = torch.randn(4096, 4096, device='cuda'); print((x @ x).sum().item())"]
    cpu_request    = "500m"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
  }
}
