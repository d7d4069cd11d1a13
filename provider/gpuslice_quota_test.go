package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func quotaConfig(ns, cpu string, slices int, extra ...string) string {
	return quotaConfigAfter(ns, cpu, slices, "gpuslice_package.large", extra...)
}

// quotaConfigAfter makes the quota depend on after (a resource list).
func quotaConfigAfter(ns, cpu string, slices int, after string, extra ...string) string {
	return providerBlock() + strings.Join(extra, "\n") + fmt.Sprintf(`
resource "gpuslice_package" "small" {
  name      = "%[1]s-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_package" "large" {
  name      = "%[1]s-32gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 100
}

resource "gpuslice_quota" "q" {
  namespace       = %[1]q
  slices          = { (gpuslice_package.small.name) = %[3]d }
  cpu_requests    = %[2]q
  memory_requests = "16384Mi"
  max_claims      = 4
  tenant_users    = ["alice"]
  tenant_groups   = ["team-a"]

  # The quota grants 0 of every package in the cluster when it is applied.
  depends_on = [%[4]s]
}
`, ns, cpu, slices, after)
}

// quotaHard reads the namespace's ResourceQuota and tenant label back from
// the API server.
func quotaHard(ns string, want map[string]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		rq, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "gpuslice", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for k, v := range want {
			got, ok := rq.Spec.Hard[corev1ResourceName(k)]
			if !ok || got.String() != v {
				return fmt.Errorf("ResourceQuota %s/gpuslice: %s = %v (present %v), want %s", ns, k, got.String(), ok, v)
			}
		}
		n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels["gpuslice.dev/tenant"] != "true" {
			return fmt.Errorf("namespace %s labels %v lack gpuslice.dev/tenant=true", ns, n.Labels)
		}
		rb, err := kube.RbacV1().RoleBindings(ns).Get(ctx, "gpuslice-tenant", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(rb.Subjects) != 2 || rb.Subjects[0].Name != "alice" || rb.Subjects[1].Name != "team-a" {
			return fmt.Errorf("RoleBinding %s/gpuslice-tenant grants %+v, want user alice and group team-a", ns, rb.Subjects)
		}
		return nil
	}
}

func TestAccQuota(t *testing.T) {
	needCluster(t)
	const ns = "acc-quota"
	small, large := ns+"-8gi", ns+"-32gi"
	devices := func(class string) string { return class + ".deviceclass.resource.k8s.io/devices" }
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy: func(*terraform.State) error {
			_, err := kube.CoreV1().ResourceQuotas(ns).Get(context.Background(), "gpuslice", metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("ResourceQuota %s/gpuslice still exists after destroy", ns)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: quotaConfig(ns, "8", 2),
				// The other package of the cluster is granted 0, not left unlimited.
				Check: quotaHard(ns, map[string]string{devices(small): "2", devices(large): "0", "requests.cpu": "8", "requests.memory": "16Gi", "count/resourceclaims.resource.k8s.io": "4"}),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("gpuslice_quota.q", tfjsonpath.New("id"), knownvalue.StringExact(ns)),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				Config: quotaConfig(ns, "12", 3),
				Check:  quotaHard(ns, map[string]string{devices(small): "3", devices(large): "0", "requests.cpu": "12"}),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_quota.q", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// A package planned and created after the quota: the quota's
				// next plan adds its 0, so the new package is not unlimited for
				// the namespace.
				Config:             quotaConfig(ns, "12", 3, mediumPackage(ns, "", "gpuslice_quota.q")),
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_quota.q", plancheck.ResourceActionUpdate)},
				},
			},
			{
				Config: quotaConfig(ns, "12", 3, mediumPackage(ns, "", "gpuslice_quota.q")),
				Check:  quotaHard(ns, map[string]string{devices(ns + "-16gi"): "0", devices(small): "3"}),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_quota.q", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// Planned before the quota, a new package gets its 0 in the
				// same apply.
				Config: quotaConfigAfter(ns, "12", 3, "gpuslice_package.large, gpuslice_package.mediumx",
					mediumPackage(ns, "", ""), mediumPackage(ns+"-x", "x", "")),
				Check: quotaHard(ns, map[string]string{devices(ns + "-x-16gi"): "0"}),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_quota.q", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				// Import reads quantities in their canonical form ("16Gi" for the
				// configured "16384Mi"); everything else must match.
				ResourceName: "gpuslice_quota.q", ImportState: true, ImportStateId: ns, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"memory_requests"},
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					if got := states[0].Attributes["memory_requests"]; got != "16Gi" {
						return fmt.Errorf("imported memory_requests = %q, want 16Gi", got)
					}
					return nil
				},
			},
			{
				// Someone raises the quota and removes the tenant label.
				PreConfig: func() {
					ctx := context.Background()
					patch := fmt.Sprintf(`{"spec":{"hard":{%q:"10"}}}`, devices(small))
					if _, err := kube.CoreV1().ResourceQuotas(ns).Patch(ctx, "gpuslice", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						t.Fatalf("edit ResourceQuota: %v", err)
					}
					if _, err := kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(`{"metadata":{"labels":{"gpuslice.dev/tenant":null}}}`), metav1.PatchOptions{}); err != nil {
						t.Fatalf("edit namespace: %v", err)
					}
				},
				Config: quotaConfig(ns, "12", 3, mediumPackage(ns, "", "")),
				Check:  quotaHard(ns, map[string]string{devices(small): "3"}),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("gpuslice_quota.q", plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue("gpuslice_quota.q", tfjsonpath.New("slices").AtMapKey(small), knownvalue.Int64Exact(3)),
					},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
			},
			{
				Config: quotaConfig(ns+"-b", "12", 3),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_quota.q", plancheck.ResourceActionReplace)},
				},
			},
		},
	})
}

// mediumPackage declares a 50 % package, after the resources in after.
func mediumPackage(ns, suffix, after string) string {
	return fmt.Sprintf(`
resource "gpuslice_package" "medium%s" {
  name       = "%s-16gi"
  gpu_model  = "Tesla V100-PCIE-32GB"
  fraction   = 50
  depends_on = [%s]
}
`, suffix, ns, after)
}
