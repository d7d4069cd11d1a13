package provider_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// A workload's container on a quarter of a real node's GPU, as a tester
// sees it on their cluster: slice-check (internal/images) in the container
// finds the device's total memory to be the slice's, its allocations
// refused past it, and keeps running so that the plan after apply is
// empty. On the local control plane pods never start: acctest/nodes runs
// the same on real nodes there.
func TestAccWorkloadRunsOnItsSlice(t *testing.T) {
	needCluster(t)
	if !own {
		testenv.Chosen(t, "runs a container: the local control plane's simulated nodes run no pods (acctest/nodes runs slice-check on real nodes); run it with KUBE_CONFIG_PATH at a cluster with GPU nodes")
	}
	needSlices(t)
	image := os.Getenv(envSliceCheck)
	if image == "" {
		testenv.Unavailable(t, "no slice-check image for the nodes to pull: set %s (registry.gpuslice.test/slice-check:1 on a `gpuslice dev up` cluster, as `gpuslice dev env` prints)", envSliceCheck)
	}
	sliceMiB, err := quarterMiB(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "acc-slice-check", "check"
	config := providerBlock() + fmt.Sprintf(`
resource "gpuslice_package" "quarter" {
  name      = "acc-slice-check-quarter"
  gpu_model = %q
  fraction  = 25
}

resource "gpuslice_quota" "q" {
  namespace       = %q
  slices          = { (gpuslice_package.quarter.name) = 1 }
  cpu_requests    = "1"
  memory_requests = "1Gi"
}

resource "gpuslice_workload" "check" {
  namespace = gpuslice_quota.q.namespace
  name      = %q
  package   = gpuslice_package.quarter.name
  wait_for  = "ready"
  timeout   = "5m"
  container {
    image          = %q
    command        = ["slice-check", "--sleep"]
    cpu_request    = "100m"
    memory_request = "64Mi"
    memory_limit   = "256Mi"
  }
}
`, sliceModel, ns, name, image)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config: config,
			Check: resource.ComposeTestCheckFunc(
				resource.TestCheckResourceAttr("gpuslice_workload.check", "phase", "Running"),
				func(*terraform.State) error {
					logs, err := logsOfWorkload(ns, name, "slice-check: the slice held")
					if err != nil {
						return err
					}
					if want := fmt.Sprintf(", %d MiB total,", sliceMiB); !strings.Contains(logs, want) {
						return fmt.Errorf("slice-check on a %d MiB slice of %s does not see it as the device's memory (%q):\n%s", sliceMiB, sliceModel, want, logs)
					}
					return nil
				},
			),
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
		}},
	})
}

// quarterMiB is the memory of a 25 % slice of sliceModel, as published.
func quarterMiB(ctx context.Context) (int64, error) {
	list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + contract.DriverName})
	if err != nil {
		return 0, err
	}
	for _, s := range list.Items {
		for _, d := range s.Spec.Devices {
			f, m := d.Attributes[contract.AttrFraction], d.Attributes[contract.AttrModel]
			if f.IntValue != nil && *f.IntValue == 25 && m.StringValue != nil && *m.StringValue == sliceModel {
				if c, ok := d.Capacity[contract.CapacityMemory]; ok {
					return c.Value.Value() >> 20, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no 25 %% slice of %s with memory capacity published", sliceModel)
}

// logsOfWorkload waits until the log of the workload's one pod holds want
// (slice-check's last line) and returns it.
func logsOfWorkload(ns, name, want string) (string, error) {
	var logs, state string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "gpuslice.dev/workload=" + name})
		if err != nil {
			return false, nil
		}
		if len(pods.Items) != 1 {
			state = fmt.Sprintf("%d pods", len(pods.Items))
			return false, nil
		}
		pod := pods.Items[0]
		state = fmt.Sprintf("pod %s %s on %s: %+v", pod.Name, pod.Status.Phase, pod.Spec.NodeName, pod.Status.ContainerStatuses)
		data, err := kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			state += "; logs: " + err.Error()
			return false, nil
		}
		logs = string(data)
		return strings.Contains(logs, want), nil
	})
	if err != nil {
		return "", fmt.Errorf("no %q in the log of workload %s/%s's pod after 2 minutes (%s):\n%s", want, ns, name, state, logs)
	}
	return logs, nil
}
