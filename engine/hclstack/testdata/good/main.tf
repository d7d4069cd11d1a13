terraform {
  required_providers {
    gpuslice = {
      source = "registry.terraform.io/gpuslice/gpuslice"
    }
  }
}

variable "gpu_model" {
  type    = string
  default = "Tesla V100-PCIE-32GB"
}

variable "context_length" {
  type    = number
  default = 4096
  validation {
    condition     = var.context_length >= 2048
    error_message = "context_length must be at least 2048 tokens."
  }
}

locals {
  namespace = "team-a"
  labels    = { team = "a" }
}

resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "small" {
  name      = "v100-8gi"
  gpu_model = var.gpu_model
  fraction  = 25
}

resource "gpuslice_package" "medium" {
  name      = "v100-16gi"
  gpu_model = var.gpu_model
  fraction  = 50
}

resource "gpuslice_quota" "team_a" {
  namespace = local.namespace
  slices = {
    (gpuslice_package.small.name)  = 2
    (gpuslice_package.medium.name) = 1
  }
  cpu_requests    = "8"
  memory_requests = "32Gi"
}

resource "gpuslice_workload" "ollama" {
  namespace = gpuslice_quota.team_a.namespace
  name      = "ollama"
  package   = gpuslice_package.small.name
  labels    = local.labels

  container {
    image = "ollama/ollama:0.24.0"
    env = {
      OLLAMA_CONTEXT_LENGTH = tostring(var.context_length)
      OLLAMA_KEEP_ALIVE     = "-1"
    }
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    port {
      container_port = 11434
    }
    readiness_probe {
      http_path = "/api/version"
      port      = 11434
    }
  }

  model_volume {
    size       = "20Gi"
    mount_path = "/root/.ollama"
  }

  expose {
    port = 11434
  }

  preload_models = ["llama3.2:3b"]
}

output "slice_memory" {
  value = gpuslice_package.small.memory
}

output "service" {
  value = gpuslice_workload.ollama.service_address
}

output "node" {
  value = gpuslice_workload.ollama.node
}
