package provider_test

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
)

func multiGPUConfig(workers, gpusPerPod, grant string) string {
	return providerBlock() + `
resource "gpuslice_package" "whole" {
  name      = "acc-multi-a100"
  gpu_model = "NVIDIA A100-SXM4-80GB"
  fraction  = 100
}

resource "gpuslice_quota" "q" {
  namespace       = "acc-multi"
  slices          = { (gpuslice_package.whole.name) = ` + grant + ` }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}

resource "gpuslice_workload" "ddp" {
  namespace    = gpuslice_quota.q.namespace
  name         = "ddp"
  package      = gpuslice_package.whole.name
  kind         = "job"
  workers      = ` + workers + `
  gpus_per_pod = ` + gpusPerPod + `
  wait_for     = "none"
  container {
    image          = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
    command        = ["torchrun", "/workspace/train.py"]
    env            = { NCCL_DEBUG = "INFO" }
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`
}

// gpus_per_pod and workers go through plan, apply, refresh and import
// without a diff (the rendezvous environment the engine adds is not read
// back as the configuration's), a changed count replaces the claim
// template, and a gang the quota cannot hold fails at plan. No A100 is
// published here, so nothing is allocated.
func TestAccWorkloadMultiGPUAndWorkers(t *testing.T) {
	needCluster(t)
	empty := resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config:           multiGPUConfig("2", "2", "4"),
				ConfigPlanChecks: empty,
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("gpuslice_workload.ddp", "workers", "2"),
					resource.TestCheckResourceAttr("gpuslice_workload.ddp", "gpus_per_pod", "2"),
					resource.TestCheckResourceAttr("gpuslice_workload.ddp", "replicas", "1"),
					resource.TestCheckResourceAttr("gpuslice_workload.ddp", "container.env.%", "1"),
				),
			},
			{ResourceName: "gpuslice_workload.ddp", ImportState: true, ImportStateId: "acc-multi/ddp", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"phase", "reason", "claim", "node", "device", "wait_for"}},
			{
				Config:           multiGPUConfig("4", "1", "4"),
				ConfigPlanChecks: empty,
				Check:            resource.TestCheckResourceAttr("gpuslice_workload.ddp", "workers", "4"),
			},
			{
				Config:      multiGPUConfig("3", "2", "4"),
				ExpectError: regexp.MustCompile(`(?s)Gang does not fit the quota.*3 workers × 2 acc-multi-a100 slices need 6`),
			},
		},
	})
}
