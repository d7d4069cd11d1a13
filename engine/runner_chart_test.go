package engine_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/deploy"
	"github.com/gpuslice/gpuslice/engine/plan"
)

// The chart and the platform do not fight over the runner's role: a
// platform whose runner block renders gpuslice-runner refuses the one a
// chart install made (the same name) instead of taking it over, and says
// how to go on.
func TestPlatformLeavesTheChartsRunnerRole(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	objs, err := deploy.Render("gpuslice-system", map[string]any{"runner": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, o := range objs {
		if r, ok := o.(*rbacv1.ClusterRole); ok && r.Name == contract.RunnerRole {
			role = r
		}
	}
	if role == nil {
		t.Fatalf("the chart with runner.enabled renders no ClusterRole %s", contract.RunnerRole)
	}
	roles := c.Client().RbacV1().ClusterRoles()
	if _, err := roles.Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := roles.Delete(ctx, role.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
	s := loadStack(t, "runner-chart", `
resource "gpuslice_platform" "p" {
  runner {
    namespace       = "flux-system"
    service_account = "tf-runner"
  }
}
`)
	p, err := e.Plan(ctx, s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "ClusterRole " + contract.RunnerRole + " already exists and was not created by gpuslice"
	if !p.Diagnostics.HasErrors() || !strings.Contains(p.Diagnostics.Err().Error(), want) {
		t.Fatalf("plan diagnostics = %v, want %q", p.Diagnostics.Err(), want)
	}
}
