package provider_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAccWorkloadAutoscaling: the autoscaler owns the replica count. Once
// it has scaled the workload to 3 (here through the scale subresource, as
// the HPA controller writes it), refresh and plan show no change and
// apply leaves 3 alone. No GPU of the package is published: nothing is
// allocated, the replicas only have to exist.
func TestAccWorkloadAutoscaling(t *testing.T) {
	needCluster(t)
	const ns = "acc-autoscale"
	config := providerBlock() + `
resource "gpuslice_package" "h100" {
  name      = "acc-autoscale-h100"
  gpu_model = "NVIDIA H100 80GB HBM3"
  fraction  = 25
}

resource "gpuslice_quota" "q" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.h100.name) = 3 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}

resource "gpuslice_workload" "serve" {
  namespace = gpuslice_quota.q.namespace
  name      = "serve"
  package   = gpuslice_package.h100.name
  wait_for  = "none"
  container {
    image          = "pytorch/torchserve:0.12.0-gpu"
    cpu_request    = "500m"
    memory_request = "1Gi"
  }
  autoscaling {
    max_replicas    = 3
    cpu_utilization = 70
    metric {
      type         = "External"
      name         = "queue_latency_seconds"
      selector     = { queue = "inference" }
      target_value = "500m"
    }
  }
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy: func(*terraform.State) error {
			if _, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "serve", metav1.GetOptions{}); err == nil {
				return fmt.Errorf("HorizontalPodAutoscaler %s/serve still there after destroy", ns)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config,
				Check:  replicas(ns, "serve", 1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gpuslice_workload.serve", tfjsonpath.New("replicas"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue("gpuslice_workload.serve", tfjsonpath.New("autoscaling").AtMapKey("min_replicas"), knownvalue.Int64Exact(1)),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				PreConfig: func() {
					_, err := kube.AppsV1().Deployments(ns).UpdateScale(context.Background(), "serve",
						&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}},
						metav1.UpdateOptions{})
					if err != nil {
						t.Fatalf("scale to 3: %v", err)
					}
				},
				Config: config,
				Check:  replicas(ns, "serve", 3),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// Import reads the block back from the HorizontalPodAutoscaler
				// and takes min_replicas as the start.
				ResourceName: "gpuslice_workload.serve", ImportState: true, ImportStateId: ns + "/serve", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"phase", "reason", "claim", "node", "device", "wait_for", "timeout"},
			},
		},
	})
}

func replicas(ns, name string, want int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		d, err := kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != want {
			return fmt.Errorf("deployment %s/%s has %d replicas, want %d", ns, name, *d.Spec.Replicas, want)
		}
		return nil
	}
}
