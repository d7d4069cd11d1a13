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

func packageConfig(name string, fraction int, extra string) string {
	return providerBlock() + fmt.Sprintf(`
resource "gpuslice_package" "p" {
  name      = %q
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = %d
  %s
}
`, name, fraction, extra)
}

// deviceClassSelector reads the package's DeviceClass back from the API
// server and checks its CEL selector pins the fraction.
func deviceClassSelector(name string, fraction int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		dc, err := kube.ResourceV1().DeviceClasses().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(dc.Spec.Selectors) != 1 || dc.Spec.Selectors[0].CEL == nil {
			return fmt.Errorf("DeviceClass %s has selectors %+v; want one CEL selector", name, dc.Spec.Selectors)
		}
		if want := fmt.Sprintf(".fraction == %d", fraction); !strings.Contains(dc.Spec.Selectors[0].CEL.Expression, want) {
			return fmt.Errorf("DeviceClass %s selector %q does not contain %q", name, dc.Spec.Selectors[0].CEL.Expression, want)
		}
		return nil
	}
}

func deviceClassGone(names ...string) func(*terraform.State) error {
	return func(*terraform.State) error {
		for _, n := range names {
			_, err := kube.ResourceV1().DeviceClasses().Get(context.Background(), n, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("DeviceClass %s still exists after destroy (err %v)", n, err)
			}
		}
		return nil
	}
}

func TestAccPackage(t *testing.T) {
	needCluster(t)
	const name, renamed = "acc-pkg-8gi", "acc-pkg-renamed"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy:             deviceClassGone(name, renamed),
		Steps: []resource.TestStep{
			{
				Config: packageConfig(name, 25, ""),
				Check:  deviceClassSelector(name, 25),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("id"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("memory"), knownvalue.StringExact("8Gi")),
					statecheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("compute_share"), knownvalue.Int64Exact(25)),
					statecheck.ExpectIdentity("gpuslice_package.p", map[string]knownvalue.Check{"name": knownvalue.StringExact(name)}),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				// In place: a new fraction changes the DeviceClass's selector.
				Config: packageConfig(name, 50, `extended_resource_name = "gpuslice.dev/acc-pkg"`),
				Check:  deviceClassSelector(name, 50),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_package.p", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("memory"), knownvalue.StringExact("16Gi")),
				},
			},
			{
				ResourceName: "gpuslice_package.p", ImportState: true, ImportStateId: name, ImportStateVerify: true,
			},
			{
				// An import block naming the resource identity: nothing to change.
				ResourceName: "gpuslice_package.p", ImportState: true, ImportStateKind: resource.ImportBlockWithResourceIdentity,
			},
			{
				// Drift no attribute shows: the selector edited with client-go.
				PreConfig: func() {
					patch := `{"spec":{"selectors":[{"cel":{"expression":"true"}}]}}`
					if _, err := kube.ResourceV1().DeviceClasses().Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						t.Fatalf("edit DeviceClass: %v", err)
					}
				},
				Config: packageConfig(name, 50, `extended_resource_name = "gpuslice.dev/acc-pkg"`),
				Check:  deviceClassSelector(name, 50),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_package.p", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// Drift an attribute shows: the fraction annotation edited.
				PreConfig: func() {
					patch := `{"metadata":{"annotations":{"gpuslice.dev/fraction":"25"}}}`
					if _, err := kube.ResourceV1().DeviceClasses().Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						t.Fatalf("edit DeviceClass: %v", err)
					}
				},
				Config: packageConfig(name, 50, `extended_resource_name = "gpuslice.dev/acc-pkg"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("gpuslice_package.p", plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("fraction"), knownvalue.Int64Exact(50)),
					},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// The name is the DeviceClass's: changing it replaces.
				Config: packageConfig(renamed, 50, ""),
				Check:  resource.ComposeTestCheckFunc(deviceClassSelector(renamed, 50), deviceClassGone(name)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_package.p", plancheck.ResourceActionReplace)},
				},
			},
		},
	})
}

func TestAccPackageInvalid(t *testing.T) {
	needCluster(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				// The engine's own diagnostic, on the attribute, at plan time.
				Config:      strings.Replace(packageConfig("acc-bad", 25, ""), "Tesla V100-PCIE-32GB", "Tesla V100-PCIE-32G", 1),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Unknown GPU model.*did you mean`),
			},
			{
				Config:      packageConfig("acc-bad", 30, ""),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Fraction not offered`),
			},
		},
	})
}
