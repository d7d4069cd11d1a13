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
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/simnode"
)

func migPackageConfig(name, profile string) string {
	return providerBlock() + fmt.Sprintf(`
resource "gpuslice_package" "p" {
  name        = %q
  gpu_model   = "NVIDIA A100-SXM4-40GB"
  mig_profile = %q
}
`, name, profile)
}

// deviceClassProfile checks the package's DeviceClass selects MIG devices
// of the profile.
func deviceClassProfile(name, profile string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		dc, err := kube.ResourceV1().DeviceClasses().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := fmt.Sprintf(`.sharing == "mig" && has(device.attributes["gpuslice.dev"].migProfile) && device.attributes["gpuslice.dev"].migProfile == %q`, profile)
		if len(dc.Spec.Selectors) != 1 || dc.Spec.Selectors[0].CEL == nil || !strings.Contains(dc.Spec.Selectors[0].CEL.Expression, want) {
			return fmt.Errorf("DeviceClass %s selectors %+v; want one CEL selector with %q", name, dc.Spec.Selectors, want)
		}
		return nil
	}
}

// A MIG package through Terraform: sized by its profile (memory,
// memory_bytes, compute share in the state), no change on the next plan,
// a new profile updates the DeviceClass in place, and import reads it
// back the same.
func TestAccMIGPackage(t *testing.T) {
	needCluster(t)
	const name = "acc-pkg-mig"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy:             deviceClassGone(name),
		Steps: []resource.TestStep{
			{
				Config: migPackageConfig(name, "1g.5gb"),
				Check:  deviceClassProfile(name, "1g.5gb"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("memory"), knownvalue.StringExact("4864Mi")),
					statecheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("memory_bytes"), knownvalue.Int64Exact(4864<<20)),
					statecheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("compute_share"), knownvalue.Int64Exact(14)),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				Config: migPackageConfig(name, "3g.20gb"),
				Check:  deviceClassProfile(name, "3g.20gb"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_package.p", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("memory"), knownvalue.StringExact("19968Mi")),
					statecheck.ExpectKnownValue("gpuslice_package.p", tfjsonpath.New("compute_share"), knownvalue.Int64Exact(43)),
				},
			},
			{
				ResourceName: "gpuslice_package.p", ImportState: true, ImportStateId: name, ImportStateVerify: true,
			},
		},
	})
}

// A typo in the profile is the engine's diagnostic at plan, with "did you
// mean"; a profile on a GPU without MIG says which models have it.
func TestAccMIGPackageInvalid(t *testing.T) {
	needCluster(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config:      migPackageConfig("acc-bad-mig", "1g.5g"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Unknown MIG profile.*did you mean\s+"1g.5gb"`),
			},
			{
				Config:      strings.Replace(migPackageConfig("acc-bad-mig", "1g.5gb"), "NVIDIA A100-SXM4-40GB", "Tesla V100-PCIE-32GB", 1),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)GPU model without MIG.*NVIDIA\s+A100-SXM4-40GB`),
			},
		},
	})
}

// An H100 node in MIG mode with seven 1g.10gb instances: gpuslice_capacity
// shows the MIG package's kind, hardware isolation, profile and instances;
// gpuslice_gpus shows the one GPU they are cut from.
func TestAccMIGCapacity(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	const node, model = "acc-h100-mig-node", "NVIDIA H100 80GB HBM3"
	simulatedNode(t, node)
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec:       resourcev1.ResourceSliceSpec{Driver: contract.DriverName, Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}, NodeName: ptr.To(node)},
	}
	for i := range 7 {
		slice.Spec.Devices = append(slice.Spec.Devices, simnode.MIGDevice(simnode.MIGInstance{Model: model, ParentUUID: "GPU-h100",
			UUID: fmt.Sprintf("MIG-h100-%d", i), Profile: "1g.10gb", Placement: i, MemoryMiB: 9984}))
	}
	if _, err := kube.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kube.ResourceV1().ResourceSlices().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	config := providerBlock() + `
resource "gpuslice_package" "mig" {
  name        = "acc-h100-1g"
  gpu_model   = "` + model + `"
  mig_profile = "1g.10gb"
}
`
	reads := `
data "gpuslice_capacity" "mig" {
  package = gpuslice_package.mig.name
}

data "gpuslice_gpus" "h100" {
  model = "` + model + `"
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{Config: config},
			{
				Config: config + reads,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.gpuslice_capacity.mig", tfjsonpath.New("packages"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectPartial(map[string]knownvalue.Check{
							"name": knownvalue.StringExact("acc-h100-1g"), "sharing": knownvalue.StringExact("mig"), "isolation": knownvalue.StringExact("hardware"),
							"mig_profile": knownvalue.StringExact("1g.10gb"), "fraction": knownvalue.Int64Exact(0),
							"published": knownvalue.Int64Exact(7), "allocated": knownvalue.Int64Exact(0), "free": knownvalue.Int64Exact(7),
						}),
					})),
					statecheck.ExpectKnownValue("data.gpuslice_gpus.h100", tfjsonpath.New("gpus"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"node": knownvalue.StringExact(node), "uuid": knownvalue.StringExact("GPU-h100")}),
					})),
				},
			},
		},
	})
}
