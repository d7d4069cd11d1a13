# Autoscaled inference: a Deployment scaled on CPU, memory and every kind
# of custom metric, and a StatefulSet scaled on a per-pod metric.
resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "quarter" {
  name      = "v100-quarter"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_quota" "serve" {
  namespace       = "serve"
  slices          = { (gpuslice_package.quarter.name) = 4 }
  cpu_requests    = "8"
  memory_requests = "32Gi"
}

resource "gpuslice_workload" "torchserve" {
  namespace = gpuslice_quota.serve.namespace
  name      = "torchserve"
  package   = gpuslice_package.quarter.name
  replicas  = 2
  container {
    image          = "pytorch/torchserve:0.12.0-gpu"
    cpu_request    = "1"
    memory_request = "4Gi"
    port {
      container_port = 8080
    }
  }
  expose {
    port = 8080
  }
  autoscaling {
    min_replicas       = 1
    max_replicas       = 4
    cpu_utilization    = 70
    memory_utilization = 80
    metric {
      type                 = "Pods"
      name                 = "ts_queue_latency_microseconds"
      target_average_value = "100k"
    }
    metric {
      type         = "Object"
      name         = "requests_per_second"
      target_value = "200"
      described_object {
        api_version = "v1"
        kind        = "Service"
        name        = "torchserve"
      }
    }
    metric {
      type         = "External"
      name         = "queue_messages_ready"
      selector     = { queue = "inference" }
      target_value = "30"
    }
  }
}

resource "gpuslice_workload" "ollama" {
  namespace = gpuslice_quota.serve.namespace
  name      = "ollama"
  package   = gpuslice_package.quarter.name
  kind      = "statefulset"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
  }
  autoscaling {
    max_replicas = 2
    metric {
      type                 = "Pods"
      name                 = "ollama_requests_in_flight"
      target_average_value = "4"
    }
  }
}
