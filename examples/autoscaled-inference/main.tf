# Autoscaled inference: Ollama behind a HorizontalPodAutoscaler, one 8 GiB
# slice of a V100 per replica. The autoscaler adds replicas under load, up
# to what the team's quota grants, and owns the replica count: applying
# this again never resets what it scaled to.
#
# Apply it next to the quickstart's platform (gpuslice_platform), or on any
# cluster where the gpuslice node plugin runs:
#
#   export KUBE_CONFIG_PATH=~/.kube/config
#   tofu init && tofu apply        # or: gpuslice apply
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

provider "gpuslice" {}

locals {
  port = 11434
}

resource "gpuslice_package" "serve" {
  name      = "serve-8gi"
  gpu_model = var.gpu_model
  fraction  = 25
}

# One slice per replica: the grant is the ceiling of the autoscaler.
resource "gpuslice_quota" "serving" {
  namespace       = "serving"
  slices          = { (gpuslice_package.serve.name) = var.max_replicas }
  cpu_requests    = "12"
  memory_requests = "24Gi"
}

resource "gpuslice_workload" "ollama" {
  namespace = gpuslice_quota.serving.namespace
  name      = "ollama"
  package   = gpuslice_package.serve.name
  # A volume per replica: each replica keeps the model it pulled.
  kind     = "statefulset"
  wait_for = var.wait_for

  container {
    image = "ollama/ollama:0.24.0"
    # Every replica pulls the model into its own volume once, then serves.
    command = ["sh", "-c", "ollama serve & until ollama list >/dev/null 2>&1; do sleep 1; done; ollama pull ${var.model}; wait"]
    env = {
      OLLAMA_CONTEXT_LENGTH = tostring(var.context_length)
      OLLAMA_HOST           = "0.0.0.0:${local.port}"
    }
    # Utilization is measured against the request: set it.
    cpu_request    = "2"
    memory_request = "4Gi"
    memory_limit   = "6Gi"
    port {
      container_port = local.port
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
    size       = "10Gi"
    mount_path = "/root/.ollama"
  }

  expose {
    port = local.port
  }

  autoscaling {
    min_replicas = 1
    max_replicas = var.max_replicas
    # Token generation keeps Ollama's CPU busy: a replica past 70 % of
    # its request asks for another.
    cpu_utilization = 70
    # With a Prometheus adapter serving a queue metric, scale on it too:
    # metric {
    #   type                 = "Pods"
    #   name                 = "ollama_requests_in_flight"
    #   target_average_value = "4"
    # }
  }
}
