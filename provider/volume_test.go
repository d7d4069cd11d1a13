package provider_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func volumeConfig(ns string) string {
	return providerBlock() + fmt.Sprintf(`
resource "gpuslice_package" "small" {
  name      = "%[1]s-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_quota" "q" {
  namespace       = %[1]q
  slices          = { (gpuslice_package.small.name) = 1 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}

resource "gpuslice_workload" "llm" {
  namespace = gpuslice_quota.q.namespace
  name      = "llm"
  package   = gpuslice_package.small.name
  replicas  = 0
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
  model_volume {
    size       = "1Gi"
    mount_path = "/root/.ollama"
  }
}
`, ns)
}

// Item 6 of issue 17 with OpenTofu: a tainted workload is replaced (the
// provider destroys, then creates it) and keeps its model volume — the same
// PersistentVolumeClaim, by UID, with what was in it; destroy keeps it too.
func TestAccModelVolumeSurvivesTaintAndDestroy(t *testing.T) {
	needCluster(t)
	const ns = "acc-keepvol"
	ctx := context.Background()
	pvcs := kube.CoreV1().PersistentVolumeClaims(ns)
	t.Cleanup(func() { pvcs.Delete(ctx, "llm-models", metav1.DeleteOptions{}) })
	var uid types.UID
	same := func(*terraform.State) error {
		pvc, err := pvcs.Get(ctx, "llm-models", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if uid == "" {
			uid = pvc.UID
			_, err := pvcs.Patch(ctx, pvc.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"test/marker":"llama3.2:3b"}}}`), metav1.PatchOptions{})
			return err
		}
		if pvc.UID != uid || pvc.Annotations["test/marker"] != "llama3.2:3b" {
			return fmt.Errorf("the model volume is not the one the workload had: UID %s (was %s), annotations %v", pvc.UID, uid, pvc.Annotations)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy:             same,
		Steps: []resource.TestStep{
			{Config: volumeConfig(ns), Check: same},
			{
				Config: volumeConfig(ns), Taint: []string{"gpuslice_workload.llm"}, Check: same,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("gpuslice_workload.llm", plancheck.ResourceActionReplace),
				}},
			},
		},
	})
}
