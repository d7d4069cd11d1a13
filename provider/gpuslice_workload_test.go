package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// v100 is the GPU model of the plan-time checks' tests: a release of
// Ollama that does not run on it.
const v100Model = "Tesla V100-PCIE-32GB"

// workloadConfig is a package of a quarter of model, a quota and an Ollama
// workload in ns.
func workloadConfig(ns, model, kind, image, context string) string {
	return providerBlock() + fmt.Sprintf(`
resource "gpuslice_package" "small" {
  name      = "%[1]s-8gi"
  gpu_model = %[5]q
  fraction  = 25
}

resource "gpuslice_quota" "q" {
  namespace       = %[1]q
  # Simulated nodes have no kubelet: a replaced pod never finishes
  # terminating and keeps its claim, so rollouts here need spare slices.
  slices          = { (gpuslice_package.small.name) = 6 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}

resource "gpuslice_workload" "ollama" {
  namespace = gpuslice_quota.q.namespace
  name      = "ollama"
  package   = gpuslice_package.small.name
  kind      = %[2]q
  wait_for  = "scheduled"
  timeout   = "2m"
  container {
    image          = %[3]q
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = %[4]q }
    port {
      container_port = 11434
    }
  }
  expose {
    port = 11434
  }
}
`, ns, kind, image, context, model)
}

// controllerImage reads the image of the workload's Deployment or
// StatefulSet back from the API server.
func controllerImage(ns, kind, name, want string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		var image string
		switch kind {
		case "deployment":
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			image = d.Spec.Template.Spec.Containers[0].Image
		case "statefulset":
			s, err := kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			image = s.Spec.Template.Spec.Containers[0].Image
		}
		if image != want {
			return fmt.Errorf("%s %s/%s runs %q, want %q", kind, ns, name, image, want)
		}
		return nil
	}
}

func TestAccWorkload(t *testing.T) {
	needSlices(t)
	const ns = "acc-workload"
	nodes, err := sliceNodes(context.Background())
	if err != nil || len(nodes) == 0 {
		t.Fatalf("nodes publishing %s slices: %v %v", sliceModel, nodes, err)
	}
	for i, n := range nodes {
		nodes[i] = regexp.QuoteMeta(n)
	}
	onANode := regexp.MustCompile(`^(` + strings.Join(nodes, "|") + `)$`)
	status := []string{"phase", "reason", "claim", "node", "device"}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy: func(*terraform.State) error {
			for _, err := range []error{
				func() error {
					_, err := kube.AppsV1().Deployments(ns).Get(context.Background(), "ollama", metav1.GetOptions{})
					return err
				}(),
				func() error {
					_, err := kube.AppsV1().StatefulSets(ns).Get(context.Background(), "ollama", metav1.GetOptions{})
					return err
				}(),
			} {
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("workload controller still there after destroy (err %v)", err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: workloadConfig(ns, sliceModel, "deployment", "ollama/ollama:0.24.0", "16384"),
				Check:  controllerImage(ns, "deployment", "ollama", "ollama/ollama:0.24.0"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gpuslice_workload.ollama", tfjsonpath.New("id"), knownvalue.StringExact(ns+"/ollama")),
					// Apply waited until the replica had its slice and a node.
					statecheck.ExpectKnownValue("gpuslice_workload.ollama", tfjsonpath.New("node"), knownvalue.StringRegexp(onANode)),
					statecheck.ExpectKnownValue("gpuslice_workload.ollama", tfjsonpath.New("device"), knownvalue.StringRegexp(regexp.MustCompile(`^gpu-\d+-25pct-\d+$`))),
					statecheck.ExpectKnownValue("gpuslice_workload.ollama", tfjsonpath.New("claim"), knownvalue.StringRegexp(regexp.MustCompile(`^ollama-`))),
					statecheck.ExpectKnownValue("gpuslice_workload.ollama", tfjsonpath.New("service_address"), knownvalue.StringExact("ollama."+ns+".svc:11434")),
					statecheck.ExpectIdentity("gpuslice_workload.ollama", map[string]knownvalue.Check{
						"namespace": knownvalue.StringExact(ns), "name": knownvalue.StringExact("ollama"),
					}),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				Config: workloadConfig(ns, sliceModel, "deployment", "ollama/ollama:0.23.0", "8192"),
				Check:  controllerImage(ns, "deployment", "ollama", "ollama/ollama:0.23.0"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_workload.ollama", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// Status is read live and may move on between the two reads;
				// wait_for and timeout only steer apply, the cluster does not
				// record them, so import sets their defaults.
				ResourceName: "gpuslice_workload.ollama", ImportState: true, ImportStateId: ns + "/ollama", ImportStateVerify: true,
				ImportStateVerifyIgnore: append(status, "wait_for", "timeout"),
			},
			{
				PreConfig: func() {
					patch := `{"spec":{"template":{"spec":{"containers":[{"name":"ollama","image":"ollama/ollama:latest"}]}}}}`
					if _, err := kube.AppsV1().Deployments(ns).Patch(context.Background(), "ollama", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						t.Fatalf("edit Deployment: %v", err)
					}
				},
				Config: workloadConfig(ns, sliceModel, "deployment", "ollama/ollama:0.23.0", "8192"),
				Check:  controllerImage(ns, "deployment", "ollama", "ollama/ollama:0.23.0"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("gpuslice_workload.ollama", plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue("gpuslice_workload.ollama", tfjsonpath.New("container").AtMapKey("image"), knownvalue.StringExact("ollama/ollama:0.23.0")),
					},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				Config: workloadConfig(ns, sliceModel, "statefulset", "ollama/ollama:0.23.0", "8192"),
				Check:  controllerImage(ns, "statefulset", "ollama", "ollama/ollama:0.23.0"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_workload.ollama", plancheck.ResourceActionReplace)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
		},
	})
}

func TestAccWorkloadInvalid(t *testing.T) {
	needCluster(t)
	const ns = "acc-invalid"
	full := workloadConfig(ns, v100Model, "deployment", "ollama/ollama:0.24.0", "16384")
	packageAndQuota := full[:strings.Index(full, `resource "gpuslice_workload"`)]
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				// The package is planned in the same run, not in the cluster
				// yet: the check still knows its GPU.
				Config:      strings.Replace(workloadConfig("acc-fresh", v100Model, "deployment", "ollama/ollama:0.30.0", "16384"), "wait_for  = \"scheduled\"", "", 1),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Image does not run on this GPU`),
			},
			{Config: packageAndQuota},
			{
				// The engine's validation, on container.env, at plan time.
				Config:      regexp.MustCompile(`env            = \{[^}]*\}`).ReplaceAllString(full, `env = { LD_PRELOAD = "/x.so" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Reserved environment variable`),
			},
			{
				// The engine's plan-time check, knowing the package's GPU from
				// the cluster: this Ollama release does not run on a V100.
				Config:      strings.Replace(full, "ollama/ollama:0.24.0", "ollama/ollama:0.30.0", 1),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Image does not run on this GPU`),
			},
		},
	})
}

// The timeouts block bounds apply's wait: pods on the simulated nodes never
// become ready, nor within 5 s on a tester's nodes (they pull Ollama's
// image of gigabytes first, or fail to), so create fails with the
// diagnosed status, the objects applied and the resource tainted.
func TestAccWorkloadTimeout(t *testing.T) {
	needSlices(t)
	const ns = "acc-timeout"
	config := strings.Replace(workloadConfig(ns, sliceModel, "deployment", "ollama/ollama:0.24.0", "16384"), `wait_for  = "scheduled"`, `wait_for  = "ready"
  timeouts {
    create = "5s"
  }`, 1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config: config,
			// Pending while pulling; a node that cannot reach Docker Hub
			// fails the pull first.
			ExpectError: regexp.MustCompile(`(?s)Workload not ready.*(Pending|ImagePullError)`),
		}},
	})
}
