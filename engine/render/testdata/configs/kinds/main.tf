# A StatefulSet with a volume per replica, a Job, probes of every kind and a
# platform with its own settings.
resource "gpuslice_platform" "this" {
  namespace    = "gpu-platform"
  tenant_label = "example.com/gpu-tenant"
  fractions    = [20, 50, 100]
}

resource "gpuslice_package" "fifth" {
  name                   = "v100-fifth"
  gpu_model              = "Tesla V100-SXM2-32GB"
  fraction               = 20
  extended_resource_name = "gpuslice.dev/v100-fifth"
}

resource "gpuslice_package" "whole" {
  name      = "v100-whole"
  gpu_model = "Tesla V100-SXM2-32GB"
  fraction  = 100
}

resource "gpuslice_quota" "ml" {
  namespace       = "ml"
  slices          = { (gpuslice_package.fifth.name) = 4 }
  cpu_requests    = "16"
  memory_requests = "64Gi"
  cpu_limits      = "32"
  memory_limits   = "128Gi"
  max_claims      = 6
}

resource "gpuslice_workload" "vllm" {
  namespace = "ml"
  name      = "vllm"
  package   = gpuslice_package.fifth.name
  kind      = "statefulset"
  replicas  = 2
  container {
    image   = "vllm/vllm-openai:v0.9.2"
    command = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    args    = ["--model", "Qwen/Qwen2.5-0.5B-Instruct"]
    port {
      container_port = 8000
    }
    liveness_probe {
      port = 8000
    }
    readiness_probe {
      command = ["cat", "/tmp/ready"]
    }
  }
  model_volume {
    size          = "50Gi"
    mount_path    = "/root/.cache/huggingface"
    storage_class = "fast"
  }
  expose {
    port        = 80
    target_port = 8000
  }
}

resource "gpuslice_workload" "finetune" {
  namespace = "ml"
  name      = "finetune"
  package   = gpuslice_package.fifth.name
  kind      = "job"
  container {
    image       = "pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime"
    args        = ["python", "train.py"]
    cpu_request = "2"
    cpu_limit   = "4"
  }
  wait_for = "none"
}
