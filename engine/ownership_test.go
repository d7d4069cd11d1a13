package engine_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
)

func TestObjectsNotOwnedAreNotTaken(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	// A device class someone made by hand, with the name a package wants.
	if _, err := c.Client().ResourceV1().DeviceClasses().Create(ctx, mustDeviceClass("owned-8gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := loadStack(t, "owned", stackHCL("owned", ""))
	p, err := e.Plan(ctx, s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Diagnostics.HasErrors() || !strings.Contains(p.Diagnostics.Err().Error(), "DeviceClass owned-8gi already exists and was not created by gpuslice") {
		t.Fatalf("plan diagnostics = %v, want an object-in-the-way error", p.Diagnostics.Err())
	}
	if err := e.Apply(ctx, p, apply.Options{}); err == nil {
		t.Fatal("apply went ahead with an object in the way")
	}
	p, err = e.Plan(ctx, s, plan.Options{Adopt: true})
	if err != nil || p.Diagnostics.HasErrors() {
		t.Fatalf("adopting plan: %v %v", err, p.Diagnostics.Err())
	}
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	requireNoChanges(t, e, s)

	// Another stack may not take this stack's objects.
	other := loadStack(t, "other", stackHCL("owned", ""))
	p, err = e.Plan(ctx, other, plan.Options{Adopt: true})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Diagnostics.HasErrors() || !strings.Contains(p.Diagnostics.Err().Error(), `belongs to gpuslice stack "owned"`) {
		t.Fatalf("plan of another stack = %v, want an ownership error", p.Diagnostics.Err())
	}
}

func TestConflictWithAnotherApplier(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	s := loadStack(t, "conflict", stackHCL("conflict", ""))
	mustApply(t, e, s)
	// Another declarative tool claims the quota's CPU with server-side apply.
	body := `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"gpuslice","namespace":"conflict"},"spec":{"hard":{"requests.cpu":"3"}}}`
	if _, err := c.Client().CoreV1().ResourceQuotas("conflict").Patch(ctx, "gpuslice", types.ApplyPatchType, []byte(body),
		metav1.PatchOptions{FieldManager: "argocd", Force: boolPtr(true)}); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, e, s)
	err := e.Apply(ctx, p, apply.Options{})
	if err == nil || !strings.Contains(err.Error(), `"argocd"`) || !strings.Contains(err.Error(), "-force-conflicts") {
		t.Fatalf("apply error = %v, want a conflict naming argocd and -force-conflicts", err)
	}
	if err := e.Apply(ctx, mustPlan(t, e, s), apply.Options{ForceConflicts: true}); err != nil {
		t.Fatal(err)
	}
	requireNoChanges(t, e, s)
}
