package engine_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster"
)

// tenantClients impersonate a user (and groups) on the test's API server.
func (a *admissionEnv) tenantClients(t *testing.T, user string, groups ...string) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	cfg := rest.CopyConfig(a.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	return kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
}

// rbacDenied fails t unless err is RBAC's refusal (not a policy's).
func rbacDenied(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || policyDenial(err) != "" {
		t.Errorf("%s: want RBAC's forbidden, got %v", what, err)
	}
}

// TestTenantRBAC impersonates the tenant user and a member of the tenant
// group that the quota's RoleBinding names: they run workloads and claim
// slices in their namespace, and cannot create device classes or resource
// slices, edit their quota, remove the policies, bind themselves more
// roles, drop their namespace's tenant label, clear a GPU's health taint
// (an annotation on its Node) or exec into pods. Someone the
// quota does not name cannot even create a claim.
func TestTenantRBAC(t *testing.T) {
	a := admission(t)
	ctx := context.Background()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	good := readCorpus(t, "testdata/admission/good")
	for _, who := range []struct {
		user   string
		groups []string
	}{{"alice", nil}, {"bob", []string{"team-adm"}}} {
		t.Run(who.user, func(t *testing.T) {
			kc, dc := a.tenantClients(t, who.user, who.groups...)
			for _, m := range good {
				if m.as == cluster.SchedulerUser {
					continue // the scheduler's claims: what only its identity may make
				}
				if err := a.create(ctx, dc, admissionTenant, m.obj, true); err != nil {
					t.Errorf("tenant cannot create %s: %v", m.file, err)
				}
			}
			if _, err := kc.CoreV1().ResourceQuotas(admissionTenant).Get(ctx, render.QuotaName, metav1.GetOptions{}); err != nil {
				t.Errorf("tenant cannot read its quota (headroom): %v", err)
			}

			_, err := kc.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, dry)
			rbacDenied(t, "create DeviceClass", err)
			_, err = kc.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
				Spec: resourcev1.ResourceSliceSpec{Driver: "gpuslice.dev", Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}, AllNodes: ptr.To(true)}}, dry)
			rbacDenied(t, "create ResourceSlice", err)
			_, err = kc.CoreV1().ResourceQuotas(admissionTenant).Patch(ctx, render.QuotaName, types.MergePatchType,
				[]byte(`{"spec":{"hard":{"adm-32gi.deviceclass.resource.k8s.io/devices":"8"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			rbacDenied(t, "edit the quota", err)
			err = kc.CoreV1().ResourceQuotas(admissionTenant).Delete(ctx, render.QuotaName, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			rbacDenied(t, "delete the quota", err)
			err = kc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, render.PolicyClaimShape, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			rbacDenied(t, "delete a policy", err)
			err = kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, render.PolicyRawGPU, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			rbacDenied(t, "delete a policy binding", err)
			_, err = kc.CoreV1().Namespaces().Patch(ctx, admissionTenant, types.JSONPatchType,
				[]byte(`[{"op":"remove","path":"/metadata/labels/`+strings.ReplaceAll(admissionTenantLabel, "/", "~1")+`"}]`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			rbacDenied(t, "drop the tenant label", err)
			_, err = kc.RbacV1().RoleBindings(admissionTenant).Create(ctx, roleBindingTo(who.user, "admin"), dry)
			rbacDenied(t, "bind itself the admin role", err)
			_, err = kc.CoreV1().ConfigMaps("kube-system").Create(ctx, configMap("x"), dry)
			rbacDenied(t, "create outside its namespace", err)
			_, err = kc.CoreV1().Nodes().Patch(ctx, "gpu-node", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"`+contract.HealthClearedAnnotation("GPU-0")+`":"`+time.Now().Format(time.RFC3339Nano)+`"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			rbacDenied(t, "clear a GPU's health taint on its Node", err)

			for _, sub := range []string{"exec", "attach", "ephemeralcontainers"} {
				verb := "create"
				if sub == "ephemeralcontainers" {
					verb = "patch"
				}
				r, err := kc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
					Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: admissionTenant, Verb: verb, Resource: "pods", Subresource: sub}},
				}, metav1.CreateOptions{})
				if err != nil || r.Status.Allowed {
					t.Errorf("tenant may %s pods/%s (err %v)", verb, sub, err)
				}
			}
		})
	}
	t.Run("not named by the quota", func(t *testing.T) {
		_, dc := a.tenantClients(t, "mallory")
		for _, m := range good {
			rbacDenied(t, "create "+m.file, a.create(ctx, dc, admissionTenant, m.obj, true))
		}
	})
}

// TestNewTenantAppliedWithPoliciesActive adds three tenants to the
// admission stack while its policies are enforced: each apply creates a
// namespace's quota and, right after, its claim template, which the grants
// policy must already admit; the claim the resourceclaim controller then
// makes for the workload's pod is admitted too.
func TestNewTenantAppliedWithPoliciesActive(t *testing.T) {
	admission(t)
	e, cl := newEngine(t)
	ctx := context.Background()
	base, err := os.ReadFile("testdata/admission/stack/main.tf")
	if err != nil {
		t.Fatal(err)
	}
	extra := ""
	for i := 1; i <= 3; i++ {
		extra += fmt.Sprintf(`
resource "gpuslice_quota" "late%[1]d" {
  namespace       = "adm-late-%[1]d"
  slices          = { (gpuslice_package.small.name) = 1 }
  cpu_requests    = "4"
  memory_requests = "8Gi"
}

resource "gpuslice_workload" "late%[1]d" {
  namespace = gpuslice_quota.late%[1]d.namespace
  name      = "llm"
  package   = gpuslice_package.small.name
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "1Gi"
  }
}
`, i)
	}
	mustApply(t, e, loadStack(t, "admission", string(base)+extra))
	for i := 1; i <= 3; i++ {
		ns := fmt.Sprintf("adm-late-%d", i)
		deadline := time.Now().Add(60 * time.Second)
		for {
			claims, err := cl.Client().ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(claims.Items) > 0 {
				if got := claims.Items[0].Labels["gpuslice.dev/package"]; got != "adm-8gi" {
					t.Errorf("claim %s/%s has package label %q", ns, claims.Items[0].Name, got)
				}
				break
			}
			if time.Now().After(deadline) {
				events, _ := cl.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
				var msgs []string
				for _, ev := range events.Items {
					msgs = append(msgs, ev.InvolvedObject.Kind+" "+ev.InvolvedObject.Name+": "+ev.Message)
				}
				t.Fatalf("no claim made for the workload's pod in %s within 60s; events:\n%s", ns, strings.Join(msgs, "\n"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
