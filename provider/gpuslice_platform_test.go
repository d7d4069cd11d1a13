package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func platformConfig(ns, fractions string) string {
	return providerBlock() + fmt.Sprintf(`
resource "gpuslice_platform" "p" {
  namespace          = %q
  fractions          = %s
  admission_policies = false
}
`, ns, fractions)
}

// platformSettings reads the platform's ConfigMap back from the API server.
func platformSettings(ns, fractions string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "gpuslice-platform", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["fractions"] != fractions || cm.Data["tenantLabel"] != "gpuslice.dev/tenant" {
			return fmt.Errorf("platform settings %v, want fractions %s and the default tenant label", cm.Data, fractions)
		}
		return nil
	}
}

// Not parallel: the platform's fractions and tenant label apply to every
// package and quota planned meanwhile.
func TestAccPlatform(t *testing.T) {
	needCluster(t)
	if own {
		t.Skip("changes cluster-wide settings")
	}
	const ns = "acc-platform"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy: func(*terraform.State) error {
			if _, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "gpuslice-platform", metav1.GetOptions{}); err == nil {
				return fmt.Errorf("platform settings still there after destroy")
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:           platformConfig(ns, "[25, 50, 100]"),
				Check:            platformSettings(ns, "25,50,100"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				Config: platformConfig(ns, "[10, 25, 50, 100]"),
				Check:  platformSettings(ns, "10,25,50,100"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_platform.p", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// A package may now use the platform's new fraction.
				Config: platformConfig(ns, "[10, 25, 50, 100]") + `
resource "gpuslice_package" "tenth" {
  name      = "acc-platform-tenth"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 10
}
`,
			},
			{ResourceName: "gpuslice_platform.p", ImportState: true, ImportStateId: ns, ImportStateVerify: true},
			{
				PreConfig: func() {
					patch := `{"data":{"fractions":"100"}}`
					if _, err := kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), "gpuslice-platform", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						t.Fatalf("edit platform settings: %v", err)
					}
				},
				Config: platformConfig(ns, "[10, 25, 50, 100]"),
				Check:  platformSettings(ns, "10,25,50,100"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_platform.p", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				Config:      platformConfig(ns, "[30]"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`does not divide a GPU into whole slices`),
			},
		},
	})
}
