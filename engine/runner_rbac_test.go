package engine_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// A runner with nothing but the runner roles (render.RunnerRBAC) applies
// a stack of every part the quickstart has and more: the platform with the
// node plugin (whose ClusterRole and binding it may grant by name) and the
// admission policies, a package, a quota (binding the tenant role) and an
// exposed workload; plans it empty and destroys it.
func TestRunnerRoleAppliesAStack(t *testing.T) {
	c := clustertest.Start(t, cluster.Options{})
	ctx := context.Background()
	admin := c.Client()
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: "gpu-node-1", Labels: map[string]string{"nvidia.com/gpu.present": "true"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.CreateNamespace(ctx, admin, "ci", nil); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: "ci"}}
	if _, err := admin.CoreV1().ServiceAccounts("ci").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role, binding, state, stateBinding := render.RunnerRBAC("ci", "runner")
	rbac := admin.RbacV1()
	for what, err := range map[string]error{
		"ClusterRole":        second(rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{})),
		"ClusterRoleBinding": second(rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})),
		"Role":               second(rbac.Roles("ci").Create(ctx, state, metav1.CreateOptions{})),
		"RoleBinding":        second(rbac.RoleBindings("ci").Create(ctx, stateBinding, metav1.CreateOptions{})),
	} {
		if err != nil {
			t.Fatalf("create the runner's %s: %v", what, err)
		}
	}
	cfg := rest.CopyConfig(c.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:ci:runner",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"}}
	// The identity is the runner's: secrets outside its namespace are not.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the runner created a Secret in default (%v): the test does not act as the runner", err)
	}
	e, err := engine.New(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	platform := `
resource "gpuslice_platform" "p" {
  namespace = "rt-sys"
` + nodePluginBlock + `
}
`
	s := loadStack(t, "runner", platform+stackHCL("rt", ""))
	mustApply(t, e, s)
	requireNoChanges(t, e, s)
	dp, err := e.PlanDestroy(ctx, "runner")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Destroy(ctx, dp, apply.Options{}); err != nil {
		t.Fatalf("the runner cannot destroy its stack: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }
