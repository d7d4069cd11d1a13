package provider_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// training_operator = "pytorchjob" goes through plan, apply, refresh and
// import without a diff, and leaving it out again replaces the PyTorchJob
// with the indexed Job, again without a diff. The test cluster gets the
// Training Operator's own PyTorchJob CRD (no operator runs, so no pod is
// created).
func TestAccWorkloadPyTorchJob(t *testing.T) {
	needCluster(t)
	servePyTorchJob(t)
	empty := resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}
	withOperator := strings.Replace(multiGPUConfig("3", "1", "4"), "  wait_for     = \"none\"\n", "  wait_for     = \"none\"\n  training_operator = \"pytorchjob\"\n", 1)
	if withOperator == multiGPUConfig("3", "1", "4") {
		t.Fatal("the training_operator line was not added to the configuration")
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config:           withOperator,
				ConfigPlanChecks: empty,
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("gpuslice_workload.ddp", "training_operator", "pytorchjob"),
					resource.TestCheckResourceAttr("gpuslice_workload.ddp", "workers", "3"),
					resource.TestCheckResourceAttr("gpuslice_workload.ddp", "phase", "Pending"),
				),
			},
			{ResourceName: "gpuslice_workload.ddp", ImportState: true, ImportStateId: "acc-multi/ddp", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"phase", "reason", "claim", "node", "device", "wait_for"}},
			{
				Config:           multiGPUConfig("3", "1", "4"),
				ConfigPlanChecks: empty,
				Check:            resource.TestCheckNoResourceAttr("gpuslice_workload.ddp", "training_operator"),
			},
		},
	})
}

// servePyTorchJob makes the cluster serve kubeflow.org/v1 PyTorchJob: on
// the test's own cluster the Training Operator's CRD, removed after
// the test; a cluster given with KUBE_CONFIG_PATH must have it already.
func servePyTorchJob(t *testing.T) {
	t.Helper()
	served := func() bool {
		list, err := kube.Discovery().ServerResourcesForGroupVersion("kubeflow.org/v1")
		if err != nil {
			return false
		}
		for _, r := range list.APIResources {
			if r.Kind == "PyTorchJob" {
				return true
			}
		}
		return false
	}
	if served() {
		return
	}
	if own {
		testenv.Unavailable(t, "the cluster at KUBE_CONFIG_PATH does not serve PyTorchJob (kubeflow.org/v1): install the Kubeflow Training Operator to run this test")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.ServeCRD(t, cfg, clustertest.PyTorchJob)
}
