package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
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
	withoutSuitePlatform(t)
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

func nodePluginConfig(ns, image string) string {
	return providerBlock() + fmt.Sprintf(`
resource "gpuslice_platform" "p" {
  namespace          = %q
  admission_policies = false
  node_plugin {
    image          = %q
    simulated_gpus = "v100-32gb:1"
    driver_root    = "/run/nvidia/driver"
    # No node has this label: the DaemonSet's image is made up, and a
    # tester's GPU nodes must not try to run it.
    node_selector  = { "gpuslice.dev/acc-no-node" = "true" }
    toleration {
      operator = "Exists"
    }
  }
}
`, ns, image)
}

// pluginImage checks the node plugin's DaemonSet as the API server has it.
func pluginImage(ns, image string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ds, err := kube.AppsV1().DaemonSets(ns).Get(context.Background(), "gpuslice-nodeplugin", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := ds.Spec.Template.Spec.Containers[0]
		if c.Image != image || !slices.Contains(c.Args, "--fractions=25,50,100") || !slices.Contains(c.Args, "--driver-root=/run/nvidia/driver") {
			return fmt.Errorf("node plugin DaemonSet runs %s with %v; want %s with the platform's fractions and driver root", c.Image, c.Args, image)
		}
		return nil
	}
}

// The node_plugin block installs the plugin's DaemonSet, reads back (empty
// plan, import), shows and restores drift, updates the image in place and
// removes the plugin when the block goes.
func TestAccPlatformNodePlugin(t *testing.T) {
	withoutSuitePlatform(t)
	const ns = "acc-nodeplugin"
	v1 := "registry.test/gpuslice/gpuslice-nodeplugin:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"
	v2 := "registry.test/gpuslice/gpuslice-nodeplugin:0.1.1@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config:           nodePluginConfig(ns, v1),
				Check:            pluginImage(ns, v1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{ResourceName: "gpuslice_platform.p", ImportState: true, ImportStateId: ns, ImportStateVerify: true},
			{
				PreConfig: func() {
					patch := `{"spec":{"template":{"spec":{"containers":[{"name":"plugin","image":"somebody/else:1"}]}}}}`
					if _, err := kube.AppsV1().DaemonSets(ns).Patch(context.Background(), "gpuslice-nodeplugin", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						t.Fatalf("edit the node plugin's DaemonSet: %v", err)
					}
				},
				Config: nodePluginConfig(ns, v1),
				Check:  pluginImage(ns, v1),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_platform.p", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				Config: nodePluginConfig(ns, v2),
				Check:  pluginImage(ns, v2),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_platform.p", plancheck.ResourceActionUpdate)},
				},
			},
			{
				Config: platformConfig(ns, "[25, 50, 100]"),
				Check: func(*terraform.State) error {
					if _, err := kube.AppsV1().DaemonSets(ns).Get(context.Background(), "gpuslice-nodeplugin", metav1.GetOptions{}); err == nil {
						return fmt.Errorf("the node plugin's DaemonSet is still there after its block was removed")
					}
					return nil
				},
			},
		},
	})
}

func reconcileConfig(ns, image string) string {
	return providerBlock() + fmt.Sprintf(`
resource "gpuslice_platform" "p" {
  namespace          = %q
  admission_policies = false
  reconcile {
    git_url = "https://git.example.com/platform/gpu-stacks.git"
    path    = "stacks/prod"
    stack   = "acc-prod"
    image   = %q
  }
}
`, ns, image)
}

// reconcileImage checks the reconciler's Deployment as the API server has
// it.
func reconcileImage(ns, image string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		d, err := kube.AppsV1().Deployments(ns).Get(context.Background(), "gpuslice-reconcile-acc-prod", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != image || !slices.Contains(c.Args, "--git-path=stacks/prod") || !slices.Contains(c.Args, "--stack=acc-prod") {
			return fmt.Errorf("reconcile Deployment runs %s with %v; want %s with the block's path and stack", c.Image, c.Args, image)
		}
		return nil
	}
}

// The reconcile block installs the reconciler's Deployment (and no node
// plugin), reads back with an empty plan, shows and restores drift, and
// removes it when the block goes. An import does not see it: its objects
// are named after the stack, which only the configuration knows.
func TestAccPlatformReconcile(t *testing.T) {
	withoutSuitePlatform(t)
	const ns = "acc-reconcile"
	image := "registry.test/gpuslice/gpuslice-reconcile:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config: reconcileConfig(ns, image),
				Check: resource.ComposeTestCheckFunc(reconcileImage(ns, image), func(*terraform.State) error {
					if _, err := kube.AppsV1().DaemonSets(ns).Get(context.Background(), "gpuslice-nodeplugin", metav1.GetOptions{}); err == nil {
						return fmt.Errorf("a platform without a node_plugin block installed the node plugin")
					}
					return nil
				}),
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				PreConfig: func() {
					patch := `{"spec":{"template":{"spec":{"containers":[{"name":"reconcile","image":"somebody/else:1"}]}}}}`
					if _, err := kube.AppsV1().Deployments(ns).Patch(context.Background(), "gpuslice-reconcile-acc-prod", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						t.Fatalf("edit the reconciler's Deployment: %v", err)
					}
				},
				Config: reconcileConfig(ns, image),
				Check:  reconcileImage(ns, image),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_platform.p", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				Config: platformConfig(ns, "[25, 50, 100]"),
				Check: func(*terraform.State) error {
					if _, err := kube.AppsV1().Deployments(ns).Get(context.Background(), "gpuslice-reconcile-acc-prod", metav1.GetOptions{}); err == nil {
						return fmt.Errorf("the reconciler's Deployment is still there after its block was removed")
					}
					return nil
				},
			},
		},
	})
}
