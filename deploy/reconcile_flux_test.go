package deploy_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/deploy"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

const fluxGuide = "../templates/guides/in-cluster-reconcile.md"

// guideBlock is the guide's first fenced block of lang that holds want.
func guideBlock(t *testing.T, lang, want string) string {
	t.Helper()
	b, err := os.ReadFile(fluxGuide)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)\n```").FindAllSubmatch(b, -1) {
		if strings.Contains(string(m[1]), want) {
			return string(m[1])
		}
	}
	t.Fatalf("%s has no ```%s block holding %q", fluxGuide, lang, want)
	return ""
}

// guideFluxValues are the --set values of the guide's helm line with
// reconcile.fluxSource, parsed as Helm parses them.
func guideFluxValues(t *testing.T) map[string]any {
	t.Helper()
	values := map[string]any{}
	args := strings.Fields(strings.ReplaceAll(guideBlock(t, "sh", "--set reconcile.fluxSource="), "\\\n", " "))
	for i, a := range args {
		if a == "--set" && i+1 < len(args) {
			if err := strvals.ParseInto(args[i+1], values); err != nil {
				t.Fatalf("%s: --set %s: %v", fluxGuide, args[i+1], err)
			}
		}
	}
	return values
}

// With the guide's reconcile.fluxSource values the Deployment reads that
// Flux source instead of cloning, and its ServiceAccount may get that
// object and nothing else of Flux's: the API server authorizes exactly
// that (and creates the objects).
func TestReconcileFromFlux(t *testing.T) {
	values := func(src string) map[string]any {
		return map[string]any{"reconcile": map[string]any{"enabled": true, "fluxSource": src, "path": "stacks/prod", "stack": "prod"}}
	}
	out, err := deploy.RenderManifests(namespace, guideFluxValues(t))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	var d *appsv1.Deployment
	var role *rbacv1.ClusterRole
	var binding *rbacv1.RoleBinding
	var sa *corev1.ServiceAccount
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.Deployment:
			if v.Name == "gpuslice-reconcile-prod" {
				d = v
			}
		case *rbacv1.ClusterRole:
			if v.Name == "gpuslice-reconcile-prod-source" {
				role = v
			}
		case *rbacv1.RoleBinding:
			if v.Name == "gpuslice-reconcile-prod-source" {
				binding = v
			}
		case *corev1.ServiceAccount:
			if v.Name == "gpuslice-reconcile-prod" {
				sa = v
			}
		}
	}
	if d == nil || role == nil || binding == nil || sa == nil {
		t.Fatalf("want the Deployment, ServiceAccount, and ClusterRole and RoleBinding gpuslice-reconcile-prod-source; got:\n%s", out)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--flux-source=gitrepository/flux-system/gpu-stacks") || !slices.Contains(args, "--git-path=stacks/prod") ||
		slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--git-url") || strings.HasPrefix(a, "--git-ref") }) {
		t.Errorf("args %v: want --flux-source and --git-path, no --git-url or --git-ref", args)
	}
	if binding.Namespace != "flux-system" {
		t.Errorf("the source's RoleBinding is in %q, want the source's namespace flux-system", binding.Namespace)
	}
	for src, want := range map[string]string{
		"helmrepository/flux-system/a": `reconcile.fluxSource "helmrepository/flux-system/a": write kind/namespace/name`,
		"gitrepository/a":              `reconcile.fluxSource "gitrepository/a"`,
	} {
		if _, err := deploy.RenderManifests(namespace, values(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("fluxSource %s: error %v, want one containing %q", src, err, want)
		}
	}
	both := values("gitrepository/flux-system/a")
	both["reconcile"].(map[string]any)["gitURL"] = "https://git.example.com/a.git"
	if _, err := deploy.RenderManifests(namespace, both); err == nil || !strings.Contains(err.Error(), "set one source") {
		t.Errorf("gitURL and fluxSource: error %v, want one saying set one source", err)
	}

	cl := clustertest.Start(t, cluster.Options{})
	ctx, client := context.Background(), cl.Client()
	for _, ns := range []string{namespace, "flux-system"} {
		if _, err := cluster.CreateNamespace(ctx, client, ns, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().RoleBindings(binding.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("Deployment: %v", err)
	}
	// The guide's NetworkPolicy admitting the reconciler to
	// source-controller: the API server takes it as written (the local
	// cluster's CNI enforces no policies, so its effect is not tested).
	var policy networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict([]byte(guideBlock(t, "yaml", "kind: NetworkPolicy")), &policy); err != nil {
		t.Fatal(err)
	}
	if _, err := client.NetworkingV1().NetworkPolicies(policy.Namespace).Create(ctx, &policy, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the guide's NetworkPolicy: %v", err)
	}
	user := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
	for _, c := range []struct {
		ns, resource, name, verb string
		allowed                  bool
	}{
		{"flux-system", "gitrepositories", "gpu-stacks", "get", true},
		{"flux-system", "gitrepositories", "other", "get", false},
		{"flux-system", "gitrepositories", "", "list", false},
		{"flux-system", "ocirepositories", "gpu-stacks", "get", false},
		{"team-a", "gitrepositories", "gpu-stacks", "get", false},
		{"flux-system", "gitrepositories", "gpu-stacks", "update", false},
	} {
		r, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Group: "source.toolkit.fluxcd.io", Resource: c.resource, Name: c.name},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != c.allowed {
			t.Errorf("%s %s %s/%s: allowed %v, want %v", c.verb, c.resource, c.ns, c.name, r.Status.Allowed, c.allowed)
		}
	}
}
