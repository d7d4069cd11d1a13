package provider_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
)

// Every attribute the cluster records reads back: a Job with probes,
// labels, command and limits, and a StatefulSet with a volume per replica,
// a Service with its own target port and preloaded models. The T4 package
// has no GPU published here, so nothing is allocated.
func TestAccWorkloadKinds(t *testing.T) {
	needCluster(t)
	const ns = "acc-kinds"
	config := providerBlock() + `
resource "gpuslice_package" "t4" {
  name      = "acc-kinds-t4"
  gpu_model = "Tesla T4"
  fraction  = 50
}

resource "gpuslice_quota" "q" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.t4.name) = 4 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
  cpu_limits      = "16"
  memory_limits   = "32Gi"
}

resource "gpuslice_workload" "job" {
  namespace = gpuslice_quota.q.namespace
  name      = "trainer"
  package   = gpuslice_package.t4.name
  kind      = "job"
  replicas  = 2
  labels    = { team = "a" }
  wait_for  = "none"
  container {
    image          = "nvidia/cuda:12.6.3-runtime-ubuntu22.04"
    command        = ["python3", "train.py"]
    args           = ["--epochs", "3"]
    cpu_request    = "500m"
    memory_request = "1Gi"
    cpu_limit      = "1"
    memory_limit   = "2Gi"
    readiness_probe {
      http_path = "/healthz"
      port      = 8080
    }
    liveness_probe {
      command        = ["cat", "/tmp/alive"]
      period_seconds = 20
    }
  }
}

resource "gpuslice_workload" "sts" {
  namespace      = gpuslice_quota.q.namespace
  name           = "ollama"
  package        = gpuslice_package.t4.name
  kind           = "statefulset"
  replicas       = 2
  wait_for       = "none"
  preload_models = ["llama3.2:3b", "qwen2.5:0.5b"]
  preload_image  = "curlimages/curl:8.11.0"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    cpu_limit      = "2"
    memory_limit   = "4Gi"
    port {
      container_port = 11434
      name           = "api"
    }
  }
  model_volume {
    size       = "20Gi"
    mount_path = "/root/.ollama"
  }
  expose {
    port        = 80
    target_port = 11434
    type        = "NodePort"
  }
}
`
	ignore := []string{"phase", "reason", "claim", "node", "device", "wait_for"}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{ResourceName: "gpuslice_workload.job", ImportState: true, ImportStateId: ns + "/trainer", ImportStateVerify: true, ImportStateVerifyIgnore: ignore},
			{ResourceName: "gpuslice_workload.sts", ImportState: true, ImportStateId: ns + "/ollama", ImportStateVerify: true, ImportStateVerifyIgnore: ignore},
		},
	})
}
