# An LLM served by Ollama on one slice of a GPU, the way it worked on a
# shared V100: a pinned image, RAM sized apart from the slice, a context
# window set on purpose, models on a persistent volume and preloaded over
# Ollama's HTTP API, and a Service for agents to call.
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

locals {
  port = 11434
}

resource "gpuslice_workload" "llm" {
  namespace      = var.namespace
  name           = var.name
  package        = var.package
  replicas       = var.replicas
  preload_models = [var.model]
  wait_for       = var.wait_for
  timeout        = var.timeout

  container {
    image = var.image
    env = {
      OLLAMA_CONTEXT_LENGTH = tostring(var.context_length)
      OLLAMA_HOST           = "0.0.0.0:${local.port}"
    }
    cpu_request    = var.cpu_request
    cpu_limit      = var.cpu_limit
    memory_request = var.memory_request
    memory_limit   = var.memory_limit

    port {
      container_port = local.port
      name           = "http"
    }
    readiness_probe {
      http_path = "/api/version"
      port      = local.port
    }
  }

  model {
    name           = var.model
    context_length = var.context_length
  }

  model_volume {
    size          = var.model_volume_size
    mount_path    = "/root/.ollama"
    storage_class = var.storage_class
  }

  expose {
    port = local.port
  }
}
