package provider_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpuslice/gpuslice/contract"
)

// An A100 on its own node, a workload holding a quarter of it: the capacity
// data source must count that quarter allocated, three free, and no whole
// GPU free although the 100 % slice itself is unallocated. gpuslice_gpus
// says where each GPU's memory was read: v2 where the plugin says so, and
// unknown for a GPU published without the attribute, as plugins older than
// it publish theirs; the A100 is healthy with the workload's slice on it,
// the T4, whose node plugin taints it gpuslice.dev/unhealthy, is unhealthy
// with the taint's reason.
func TestAccDataSources(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const node, ns = "acc-a100-node", "acc-capacity"
	simulatedNode(t, node)
	a100 := simulatedGPU{node: node, model: "NVIDIA A100-SXM4-40GB", uuid: "GPU-a100", cc: "8.0.0", arch: "Ampere", driver: "580.95.05", memory: "40Gi", memorySource: "nvml_v2"}
	if err := a100.publish(ctx); err != nil {
		t.Fatal(err)
	}
	const older = "acc-older-plugin-node"
	simulatedNode(t, older)
	t4 := simulatedGPU{node: older, model: "Tesla T4", uuid: "GPU-t4-older", cc: "7.5.0", arch: "Turing", driver: "535.54.03", memory: "15Gi",
		taints: []resourcev1.DeviceTaint{{Key: contract.TaintUnhealthy, Value: "ecc-double-bit", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}
	if err := t4.publish(ctx); err != nil {
		t.Fatal(err)
	}
	resources := providerBlock() + `
resource "gpuslice_package" "quarter" {
  name      = "acc-a100-10gi"
  gpu_model = "NVIDIA A100-SXM4-40GB"
  fraction  = 25
}

resource "gpuslice_package" "whole" {
  name      = "acc-a100-40gi"
  gpu_model = "NVIDIA A100-SXM4-40GB"
  fraction  = 100
}

resource "gpuslice_quota" "q" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.quarter.name) = 4 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}

resource "gpuslice_workload" "w" {
  namespace = gpuslice_quota.q.namespace
  name      = "holder"
  package   = gpuslice_package.quarter.name
  wait_for  = "scheduled"
  timeout   = "2m"
  container {
    image          = "nvidia/cuda:12.6.3-runtime-ubuntu22.04"
    command        = ["sleep", "infinity"]
    cpu_request    = "500m"
    memory_request = "512Mi"
    memory_limit   = "512Mi"
  }
}
`
	reads := `
data "gpuslice_capacity" "quarter" {
  package = gpuslice_package.quarter.name
}

data "gpuslice_capacity" "whole" {
  package = gpuslice_package.whole.name
}

data "gpuslice_gpus" "a100" {
  model = "NVIDIA A100-SXM4-40GB"
}

data "gpuslice_gpus" "older" {
  node = "` + older + `"
}
`
	pkg := func(name string, published, allocated, free int64) knownvalue.Check {
		return knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectPartial(map[string]knownvalue.Check{
			"name": knownvalue.StringExact(name), "published": knownvalue.Int64Exact(published),
			"allocated": knownvalue.Int64Exact(allocated), "free": knownvalue.Int64Exact(free),
			"nodes": knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectExact(map[string]knownvalue.Check{
				"node": knownvalue.StringExact(node), "published": knownvalue.Int64Exact(published),
				"allocated": knownvalue.Int64Exact(allocated), "free": knownvalue.Int64Exact(free),
			})}),
		})})
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{Config: resources},
			{
				Config: resources + reads,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.gpuslice_capacity.quarter", tfjsonpath.New("packages"), pkg("acc-a100-10gi", 4, 1, 3)),
					statecheck.ExpectKnownValue("data.gpuslice_capacity.whole", tfjsonpath.New("packages"), pkg("acc-a100-40gi", 1, 0, 0)),
					statecheck.ExpectKnownValue("data.gpuslice_gpus.a100", tfjsonpath.New("gpus"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectExact(map[string]knownvalue.Check{
							"node": knownvalue.StringExact(node), "model": knownvalue.StringExact("NVIDIA A100-SXM4-40GB"),
							"uuid": knownvalue.StringExact("GPU-a100"), "index": knownvalue.Int64Exact(0),
							"compute_capability": knownvalue.StringExact("8.0.0"), "architecture": knownvalue.StringExact("Ampere"),
							"driver_version": knownvalue.StringExact("580.95.05"), "memory_bytes": knownvalue.Int64Exact(40 << 30),
							"memory_source": knownvalue.StringExact("nvml_v2"),
							"health":        knownvalue.StringExact("healthy"), "health_reason": knownvalue.Null(), "drained": knownvalue.Null(),
							"taints": knownvalue.ListExact([]knownvalue.Check{}),
							"slices": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringRegexp(regexp.MustCompile("^" + ns + "/holder-"))}),
						}),
					})),
					statecheck.ExpectKnownValue("data.gpuslice_gpus.older", tfjsonpath.New("gpus"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectPartial(map[string]knownvalue.Check{
							"node": knownvalue.StringExact(older), "memory_bytes": knownvalue.Int64Exact(15 << 30),
							"memory_source": knownvalue.StringExact("unknown"),
							"health":        knownvalue.StringExact("unhealthy"), "health_reason": knownvalue.StringExact("ecc-double-bit"),
							"taints": knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectExact(map[string]knownvalue.Check{
								"key": knownvalue.StringExact(contract.TaintUnhealthy), "value": knownvalue.StringExact("ecc-double-bit"),
								"effect": knownvalue.StringExact("NoSchedule"), "from_node_plugin": knownvalue.Bool(true),
								"rules": knownvalue.ListExact([]knownvalue.Check{}),
							})}),
							"slices": knownvalue.ListExact([]knownvalue.Check{}),
						}),
					})),
				},
			},
		},
	})
}
