package engine_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/capacity"
	"github.com/gpuslice/gpuslice/engine/maintenance"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// drainHCL is a whole-A100-80GB package (no other engine test publishes
// that model) and its quota; drainWorkloadHCL a workload of one pod that
// wants a slice of it.
const drainHCL = `
resource "gpuslice_package" "whole" {
  name      = "drain-whole"
  gpu_model = "NVIDIA A100-SXM4-80GB"
  fraction  = 100
}

resource "gpuslice_quota" "q" {
  namespace       = "drain"
  slices          = { (gpuslice_package.whole.name) = 1 }
  cpu_requests    = "2"
  memory_requests = "4Gi"
}
`

const drainWorkloadHCL = `
resource "gpuslice_workload" "job" {
  namespace = gpuslice_quota.q.namespace
  name      = "job"
  package   = gpuslice_package.whole.name
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "100m"
    memory_request = "256Mi"
  }
}
`

// TestDrainedGPUsAreNotFree: the plan-time capacity of a drained node's
// GPUs is nil. With both A100s of a node drained, capacity counts them
// published but not free and the plan of a workload wanting one warns
// that no slice is free; undrained, both are free again and the plan
// does not warn.
func TestDrainedGPUsAreNotFree(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	node := "drain-a100-node"
	n, err := simnode.Start(ctx, c, node, simulate.Spec{Profile: "a100-sxm4-80gb", Count: 2}, publish.Options{Fractions: []int{100}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := simnode.Published(ctx, c.Client(), []*simnode.Node{n}, time.Now(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// The package applied (capacity counts by its DeviceClass), the
	// workload only planned: it wants a slice it does not hold.
	mustApply(t, e, loadStack(t, "drain", drainHCL))
	s := loadStack(t, "drain", drainHCL+drainWorkloadHCL)
	noFree := "gpuslice_workload.job.package: No free slice now"
	if p := mustPlan(t, e, s); contains(warningsOf(p.Diagnostics), noFree) {
		t.Fatalf("undrained: plan warns %q", warningsOf(p.Diagnostics))
	}
	if _, err := maintenance.Drain(ctx, c.Client(), maintenance.Target{Node: node}, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = maintenance.Undrain(context.Background(), c.Client(), maintenance.Target{Node: node}) })
	// Wait for the drain to show in what a run reads rather than for a
	// time.
	pollCapacity(t, e, "drain-whole", func(pc capacity.Package) bool { return pc.Published == 2 && pc.Free == 0 })
	if p := mustPlan(t, e, s); !contains(warningsOf(p.Diagnostics), noFree) {
		t.Errorf("drained: plan warnings %q lack %q", warningsOf(p.Diagnostics), noFree)
	}
	if _, err := maintenance.Undrain(ctx, c.Client(), maintenance.Target{Node: node}); err != nil {
		t.Fatal(err)
	}
	pollCapacity(t, e, "drain-whole", func(pc capacity.Package) bool { return pc.Published == 2 && pc.Free == 2 })
	if p := mustPlan(t, e, s); contains(warningsOf(p.Diagnostics), noFree) {
		t.Errorf("undrained again: plan warns %q", warningsOf(p.Diagnostics))
	}
}

func pollCapacity(t *testing.T, e *engine.Engine, name string, ok func(capacity.Package) bool) {
	t.Helper()
	var last capacity.Package
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		e.Refresh() // a run that only reads sees the cluster as its lists found it: each poll is a run
		pcs, err := e.Capacity(ctx)
		if err != nil {
			return false, err
		}
		for _, pc := range pcs {
			if pc.Name == name {
				last = pc
				return ok(pc), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("capacity of %s: %v; last %+v", name, err, last)
	}
}
