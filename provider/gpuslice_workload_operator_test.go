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
	testTrainingOperator(t, "pytorchjob", clustertest.PyTorchJob)
}

// The same for training_operator = "trainjob" (a TrainJob and its
// TrainingRuntime) with Kubeflow Trainer's own CRDs.
func TestAccWorkloadTrainJob(t *testing.T) {
	testTrainingOperator(t, "trainjob", clustertest.TrainJob, clustertest.TrainingRuntime)
}

func testTrainingOperator(t *testing.T, operator string, crds ...clustertest.CRD) {
	needCluster(t)
	serveCRDs(t, crds...)
	empty := resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}
	withOperator := strings.Replace(multiGPUConfig("3", "1", "4"), "  wait_for     = \"none\"\n", "  wait_for     = \"none\"\n  training_operator = \""+operator+"\"\n", 1)
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
					resource.TestCheckResourceAttr("gpuslice_workload.ddp", "training_operator", operator),
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

// serveCRDs makes the cluster serve the CRDs' kinds: on the test's own
// cluster the projects' own CRDs, removed after the test; a cluster given
// with KUBE_CONFIG_PATH must have them already.
func serveCRDs(t *testing.T, crds ...clustertest.CRD) {
	t.Helper()
	var missing []clustertest.CRD
	for _, crd := range crds {
		if !served(crd) {
			missing = append(missing, crd)
		}
	}
	if len(missing) == 0 {
		return
	}
	if own {
		testenv.Unavailable(t, "the cluster at KUBE_CONFIG_PATH does not serve %s (%s/%s): install the project that provides it to run this test",
			missing[0].Kind, missing[0].Group, missing[0].Version)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.ServeCRD(t, cfg, missing...)
}

func served(crd clustertest.CRD) bool {
	list, err := kube.Discovery().ServerResourcesForGroupVersion(crd.Group + "/" + crd.Version)
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Kind == crd.Kind {
			return true
		}
	}
	return false
}
