# Ollama serving llama3.2:3b on an 8 GiB slice: an image that still runs on
# Volta, RAM sized apart from the slice, the context set explicitly, models
# on a persistent volume, pulled once by a Job through the Service.
resource "gpuslice_workload" "ollama" {
  namespace = gpuslice_quota.team_a.namespace
  name      = "ollama"
  package   = gpuslice_package.small.name
  wait_for  = "ready"
  timeout   = "10m"

  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = "16384" }
    port {
      container_port = 11434
    }
  }

  model_volume {
    size       = "20Gi"
    mount_path = "/root/.ollama"
  }

  model {
    name           = "llama3.2:3b"
    context_length = 16384
  }

  expose {
    port = 11434
  }

  preload_models = ["llama3.2:3b"]
}

output "ollama" {
  value = {
    address = gpuslice_workload.ollama.service_address
    node    = gpuslice_workload.ollama.node
    slice   = gpuslice_workload.ollama.device
  }
}
