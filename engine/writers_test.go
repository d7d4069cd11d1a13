package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// cheapStack is one package, one quota and n zero-replica workloads named
// <prefix>0… in namespace ns: 3 + 2n objects of kinds no controller makes
// pods for. contextLength tells two configurations of one stack apart.
func cheapStack(stack, ns, prefix string, n int, contextLength string) *spec.Stack {
	s := &spec.Stack{Name: stack}
	s.Packages = []*spec.Package{{Meta: spec.Meta{Address: "gpuslice_package.small"}, Name: ns + "-8gi", GPUModel: "Tesla V100-PCIE-32GB", Fraction: 25}}
	s.Quotas = []*spec.Quota{{Meta: spec.Meta{Address: "gpuslice_quota.q"}, Namespace: ns, Slices: map[string]int64{ns + "-8gi": 1}, CPURequests: "100"}}
	for i := range n {
		s.Workloads = append(s.Workloads, &spec.Workload{
			Meta:      spec.Meta{Address: fmt.Sprintf("gpuslice_workload.%s%d", prefix, i)},
			Namespace: ns, Name: fmt.Sprintf("%s%d", prefix, i), Package: ns + "-8gi", Kind: spec.KindDeployment, Replicas: 0,
			Container: spec.Container{Image: "ollama/ollama:0.24.0", CPURequest: "100m", MemoryRequest: "64Mi",
				Env: map[string]string{"OLLAMA_CONTEXT_LENGTH": contextLength}},
			WaitFor: spec.WaitNone, Timeout: "1m",
		})
	}
	s.Resolve(tables.BuiltinGPUModels())
	return s
}

// stackState checks the invariants every interruption must keep: no
// orphan (an object labelled with the stack that neither the inventory
// nor the configuration has), no duplicate (more objects of a kind than the
// configuration renders), and — once converged — the inventory equal to
// what exists. It returns how many objects the stack has.
func stackState(t *testing.T, e *engine.Engine, c *cluster.Cluster, s *spec.Stack, converged bool) int {
	t.Helper()
	ctx := context.Background()
	p := mustPlan(t, e, s)
	want := map[string]bool{}
	perKind := map[string]int{}
	for _, r := range p.Desired {
		want[r.Key()] = true
		perKind[r.Kind]++
	}
	inv, err := e.Inventory.Load(ctx, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, r := range inv {
		recorded[r.Key()] = true
	}
	live := map[string]bool{}
	for _, kind := range []string{"DeviceClass", "ResourceQuota", "ResourceClaimTemplate", "Deployment"} {
		k, err := objects.KindOf(map[string]string{"DeviceClass": "resource.k8s.io", "ResourceClaimTemplate": "resource.k8s.io", "Deployment": "apps"}[kind], kind)
		if err != nil {
			t.Fatal(err)
		}
		list, err := e.Clients.Dynamic.Resource(k.GVR).List(ctx, metav1.ListOptions{LabelSelector: objects.LabelStack + "=" + s.Name})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, u := range list.Items {
			if u.GetDeletionTimestamp() != nil {
				continue // being deleted: gone for the stack's purposes
			}
			ref := objects.Ref{Group: k.GVR.Group, Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName()}
			live[ref.Key()] = true
			if !want[ref.Key()] && !recorded[ref.Key()] {
				t.Errorf("orphan: %s is labelled with stack %s but neither configured nor in its inventory", ref, s.Name)
			}
			if want[ref.Key()] {
				n++
			}
		}
		if converged && n != perKind[kind] {
			t.Errorf("%d %s objects of the configuration exist, want %d", n, kind, perKind[kind])
		}
		if n > perKind[kind] {
			t.Errorf("duplicate: %d %s objects, the configuration has %d", n, kind, perKind[kind])
		}
	}
	if converged {
		if p.HasChanges() {
			t.Errorf("not converged:\n%s", planText(p))
		}
		for k := range recorded {
			if ref, _ := objects.ParseKey(k); ref.Kind != "Namespace" && !live[k] {
				t.Errorf("inventory lists %s, which does not exist", ref)
			}
		}
		for k := range live {
			if !recorded[k] {
				t.Errorf("%s exists but the inventory does not list it", k)
			}
		}
	}
	return len(live)
}

// Two writers plan against one inventory: the first to apply wins, the
// second fails with a conflict before changing anything.
func TestSecondWriterConflictsAndChangesNothing(t *testing.T) {
	e, c := newEngine(t)
	a := cheapStack("occ", "occ", "w", 6, "4096")
	b := cheapStack("occ", "occ", "w", 3, "8192")
	mustApply(t, e, cheapStack("occ", "occ", "w", 4, "2048"))
	pa, pb := mustPlan(t, e, a), mustPlan(t, e, b)
	if err := e.Apply(context.Background(), pa, apply.Options{Writer: plan.Writer{Who: "alice@laptop (gpuslice apply)"}}); err != nil {
		t.Fatal(err)
	}
	err := e.Apply(context.Background(), pb, apply.Options{})
	var conflict *apply.ConflictError
	if !errors.As(err, &conflict) || conflict.Started {
		t.Fatalf("second apply: %v, want a conflict before any change", err)
	}
	if !strings.Contains(err.Error(), "alice@laptop (gpuslice apply)") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("conflict message: %v", err)
	}
	requireNoChanges(t, e, a)
	stackState(t, e, c, a, true)
}

// The stale-plan check: an object edited between plan and apply stops
// the apply before its first write, naming the object; with Replanned the
// fresh plan is applied instead.
func TestStalePlanIsRefused(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	mustApply(t, e, cheapStack("stale", "stale", "w", 2, "4096"))
	next := cheapStack("stale", "stale", "w", 2, "8192")
	p := mustPlan(t, e, next)
	patch := []byte(`{"spec":{"hard":{"requests.cpu":"7"}}}`)
	if _, err := c.Client().CoreV1().ResourceQuotas("stale").Patch(ctx, "gpuslice", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Refresh() // the check plans from the engine's view: let it list the edit now rather than when its watch brings it
	err := e.Apply(ctx, p, apply.Options{})
	var stale *apply.StalePlanError
	if !errors.As(err, &stale) || !strings.Contains(err.Error(), "ResourceQuota stale/gpuslice: planned to no-op, now to update") || !strings.Contains(err.Error(), "-replan") {
		t.Fatalf("apply of a stale plan: %v", err)
	}
	d, _ := c.Client().AppsV1().Deployments("stale").Get(ctx, "w0", metav1.GetOptions{})
	if d.Spec.Template.Spec.Containers[0].Env[0].Value != "4096" {
		t.Fatal("the stale plan changed a Deployment")
	}
	var replanned *plan.Plan
	if err := e.Apply(ctx, p, apply.Options{Replanned: func(fresh *plan.Plan) { replanned = fresh }}); err != nil {
		t.Fatal(err)
	}
	if replanned == nil || replanned.Count(plan.Update) != 3 || p.Count(plan.Update) != 3 {
		t.Fatalf("replanned: %v", replanned)
	}
	requireNoChanges(t, e, next)
}

// A writer whose inventory another writer takes over mid-apply (both
// without the lock) stops at once and fails; the other's apply stands.
func TestWriterBeatenMidApplyStops(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	a := cheapStack("beaten", "beaten", "a", 40, "4096")
	b := cheapStack("beaten", "beaten", "b", 10, "8192")
	pa := mustPlan(t, e, a)
	var seen atomic.Int32
	var bErr error
	err := e.Apply(ctx, pa, apply.Options{Concurrency: 1, Progress: func(ev apply.Event) {
		if seen.Add(1) == 10 {
			// The other writer plans and applies while this one works.
			bErr = e.Apply(ctx, mustPlan(t, e, b), apply.Options{Writer: plan.Writer{Who: "bob@desk (gpuslice apply)"}})
		}
	}})
	var conflict *apply.ConflictError
	if !errors.As(err, &conflict) || !conflict.Started || conflict.By.Who != "bob@desk (gpuslice apply)" {
		t.Fatalf("beaten apply: %v", err)
	}
	if bErr != nil {
		t.Fatalf("the winning apply failed: %v", bErr)
	}
	// How soon the beaten apply notices depends on when the inventory's
	// watch event arrives, so the cluster may mix both until one more
	// apply of the winner's configuration: never an orphan, and that one
	// apply converges.
	t.Logf("the beaten apply stopped after %d of %d changes", conflict.Done, conflict.Total)
	stackState(t, e, c, b, false)
	mustApply(t, e, b)
	stackState(t, e, c, b, true)
}

// A graceful stop (Ctrl-C) finishes the writes in flight, records exactly
// what was done, and the next plan shows exactly the rest.
func TestStoppedApplyRecordsWhatItDid(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	s := cheapStack("stopped", "stopped", "w", 30, "4096")
	destroyStack(t, e, "stopped") // left by an earlier run (-count)
	p := mustPlan(t, e, s)
	stop, cancel := context.WithCancelCause(ctx)
	var applied atomic.Int32
	err := e.Apply(ctx, p, apply.Options{Concurrency: 4, Stop: stop, Progress: func(ev apply.Event) {
		if ev.Err == nil && applied.Add(1) == 20 {
			cancel(errors.New("interrupted"))
		}
	}})
	var stopped *apply.InterruptedError
	if !errors.As(err, &stopped) || stopped.Done < 20 || stopped.Done > 20+2*4 || !strings.Contains(err.Error(), "stopped (interrupted)") {
		t.Fatalf("stopped apply: %v", err)
	}
	n := stackState(t, e, c, s, false)
	rec, _ := e.Inventory.Load(ctx, "stopped")
	if len(rec) != stopped.Done {
		t.Errorf("inventory lists %d objects after %d changes", len(rec), stopped.Done)
	}
	next := mustPlan(t, e, s)
	if next.Count(plan.Create) != len(p.Desired)-stopped.Done || next.Count(plan.Update) != 0 || n+1 != stopped.Done {
		t.Errorf("after stopping at %d of %d (%d live objects), the plan is:\n%s", stopped.Done, len(p.Desired), n, planText(next))
	}
	mustApply(t, e, s)
	stackState(t, e, c, s, true)
}

func destroyStack(t *testing.T, e *engine.Engine, stack string) {
	t.Helper()
	p, err := e.PlanDestroy(context.Background(), stack)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Destroy(context.Background(), p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
}
