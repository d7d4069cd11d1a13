package engine_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// TestInterruptedApplyConverges stops the API server in the middle of an
// apply, starts it again, and applies a smaller configuration: everything
// the interrupted apply created but the configuration no longer has is
// pruned, nothing is duplicated.
func TestInterruptedApplyConverges(t *testing.T) {
	// A cluster of its own: the outage would disturb the controllers the
	// other tests rely on.
	c := clustertest.Start(t, cluster.Options{})
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx := context.Background()
	extra := ""
	for _, name := range []string{"a", "b", "c", "d"} {
		extra += `
resource "gpuslice_workload" "w` + name + `" {
  namespace = gpuslice_quota.q.namespace
  name      = "w` + name + `"
  package   = gpuslice_package.small.name
  wait_for  = "none"
  container {
    image          = "busybox:1.36"
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`
	}
	big := loadStack(t, "outage", stackHCL("outage", extra))
	p := mustPlan(t, e, big)
	applied := 0
	err = e.Apply(ctx, p, apply.Options{Concurrency: 1, Progress: func(ev apply.Event) {
		if ev.Err == nil {
			applied++
		}
		if applied == 5 && ev.Err == nil {
			c.StopAPIServer()
		}
	}})
	if err == nil {
		t.Fatal("apply succeeded although the API server was stopped half-way")
	}
	t.Logf("interrupted after %d objects: %v", applied, firstLine(err))
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}

	small := loadStack(t, "outage", stackHCL("outage", ""))
	final := mustApply(t, e, small)
	requireNoChanges(t, e, small)

	// No orphans: every object labelled with the stack is one the
	// configuration renders, and the inventory lists exactly those.
	want := map[string]bool{}
	for _, r := range final.Desired {
		want[r.Key()] = true
	}
	for _, kind := range []string{"Deployment", "ResourceClaimTemplate"} {
		var names []string
		switch kind {
		case "Deployment":
			l, err := c.Client().AppsV1().Deployments("outage").List(ctx, metav1.ListOptions{LabelSelector: objects.LabelStack + "=outage"})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range l.Items {
				names = append(names, d.Name)
			}
		case "ResourceClaimTemplate":
			l, err := c.Client().ResourceV1().ResourceClaimTemplates("outage").List(ctx, metav1.ListOptions{LabelSelector: objects.LabelStack + "=outage"})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range l.Items {
				names = append(names, d.Name)
			}
		}
		if len(names) != 1 {
			t.Errorf("%d %s objects left in the stack (%v), want 1", len(names), kind, names)
		}
	}
	refs, err := e.Inventory.Load(ctx, "outage")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != len(want) {
		t.Errorf("inventory has %d objects, want %d", len(refs), len(want))
	}
	for _, r := range refs {
		if !want[r.Key()] {
			t.Errorf("inventory still lists %s", r)
		}
	}
}
