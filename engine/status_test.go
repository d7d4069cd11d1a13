package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/acctest/draproof"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/status"
)

// statusHCL declares a package of a V100-SXM2-32GB (a model no other test
// publishes, so their pending pods cannot take its slices), one of a model
// nobody publishes, a quota, and the given workloads.
func statusHCL(workloads string) string {
	return `
resource "gpuslice_package" "half" {
  name      = "sxm-16gi"
  gpu_model = "Tesla V100-SXM2-16GB" # none published: pair and greedy never take the whole GPU
  fraction  = 50
}
resource "gpuslice_package" "whole" {
  name      = "sxm-32gi"
  gpu_model = "Tesla V100-SXM2-32GB"
  fraction  = 100
}
resource "gpuslice_quota" "q" {
  namespace       = "diagnose"
  slices          = { (gpuslice_package.half.name) = 1, (gpuslice_package.whole.name) = 2 }
  cpu_requests    = "3"
  memory_requests = "16Gi"
}
` + workloads
}

func workloadHCL(name, pkg string, replicas int, cpu string) string {
	return `
resource "gpuslice_workload" "` + name + `" {
  namespace = gpuslice_quota.q.namespace
  name      = "` + name + `"
  package   = gpuslice_package.` + pkg + `.name
  replicas  = ` + string(rune('0'+replicas)) + `
  wait_for  = "scheduled"
  timeout   = "8s"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "` + cpu + `"
    memory_request = "1Gi"
  }
}
`
}

// TestStatusReasonsFromTheCluster runs workloads into each wall the real
// scheduler, resourceclaim controller and quota admission put up, and
// checks the diagnosis names it.
func TestStatusReasonsFromTheCluster(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	// One whole V100-SXM2-32GB on gpu-node-2.
	gpu := &draproof.Proof{Client: c.Client(), Node: "gpu-node-2", Model: "Tesla V100-SXM2-32GB"}
	if _, err := gpu.PublishGPU(ctx, 50, 100); err != nil {
		t.Fatal(err)
	}

	s := loadStack(t, "diagnose", statusHCL(
		workloadHCL("first", "whole", 1, "500m")+ // first and second want
			workloadHCL("second", "whole", 1, "500m")+ // the one whole GPU
			workloadHCL("pair", "half", 2, "100m")+ // quota grants one 50 % slice
			workloadHCL("greedy", "half", 1, "4"))) // more CPU than the namespace has
	p, err := e.Plan(ctx, s, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The plan-time quota check refuses greedy. Its status must still say
	// why when the quota fills between plan and apply (another team's pods
	// start), so the objects are applied regardless.
	var errs []string
	for _, d := range p.Diagnostics {
		if d.Severity == diag.Error {
			errs = append(errs, d.Address+"."+d.Attribute+": "+d.Summary)
		}
	}
	if len(errs) != 1 || errs[0] != "gpuslice_workload.greedy.container.cpu_request: Not enough quota" {
		t.Fatalf("plan errors = %q, want greedy's quota refused", errs)
	}
	if err := apply.Run(ctx, e.Clients.Dynamic, e.Inventory, p, apply.Options{}); err != nil {
		t.Fatal(err)
	}

	waitFor := func(addr string, want status.Reason) status.Status {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			all, err := e.Status(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			st := all[addr]
			if st.Reason == want {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %s (%s) %q, want reason %s", addr, st.Phase, st.Reason, st.Message, want)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	// first and second race for the one GPU: one gets it, the other waits.
	var winner, waiter string
	deadline := time.Now().Add(90 * time.Second)
	for winner == "" {
		all, err := e.Status(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		a, b := all["gpuslice_workload.first"], all["gpuslice_workload.second"]
		switch {
		case a.Reason == status.Scheduled && b.Reason == status.WaitingForSlice:
			winner, waiter = "gpuslice_workload.first", "gpuslice_workload.second"
		case b.Reason == status.Scheduled && a.Reason == status.WaitingForSlice:
			winner, waiter = "gpuslice_workload.second", "gpuslice_workload.first"
		case time.Now().After(deadline):
			t.Fatalf("first %s %q, second %s %q: want one Scheduled and one WaitingForSlice", a.Reason, a.Message, b.Reason, b.Message)
		default:
			time.Sleep(500 * time.Millisecond)
		}
	}
	got := waitFor(winner, status.Scheduled)
	if got.Node != "gpu-node-2" || got.Device != "gpu-0-100pct-1" || got.Claim == "" || got.Phase != status.Pending {
		t.Errorf("%s = %+v, want scheduled on gpu-node-2 with the whole-GPU device", winner, got)
	}
	waiting := waitFor(waiter, status.WaitingForSlice)
	if !strings.Contains(waiting.Message, "waiting for a free slice: no sxm-32gi slice is free") {
		t.Errorf("%s message = %q", waiter, waiting.Message)
	}
	pair := waitFor("gpuslice_workload.pair", status.GPUQuotaExhausted)
	if !strings.Contains(pair.Message, `raise slices["sxm-16gi"]`) || !strings.Contains(pair.Message, "sxm-16gi.deviceclass.resource.k8s.io/devices") {
		t.Errorf("pair message = %q", pair.Message)
	}
	greedy := waitFor("gpuslice_workload.greedy", status.CPUQuotaExhausted)
	if !strings.Contains(greedy.Message, "CPU/memory quota exhausted") || !strings.Contains(greedy.Message, "requests.cpu") {
		t.Errorf("greedy message = %q", greedy.Message)
	}

	// Apply's wait: "scheduled" is reached for the winner; the waiter
	// times out with its reason. It is woken by the view's watches, never
	// by listing again: no list or get while it waits (at most one new
	// watch per informer, should the API server end one).
	before := e.Clients.Requests.Counts()
	_, err = e.Wait(ctx, s.Workloads[:2], nil)
	if err == nil || !strings.Contains(err.Error(), waiter+": Pending (WaitingForSlice)") || strings.Contains(err.Error(), winner) {
		t.Fatalf("wait error = %v, want only %s, waiting for a slice", err, waiter)
	}
	if d := e.Clients.Requests.Counts().Sub(before); d.List != 0 || d.Get != 0 || d.Watch > int64(e.Informers()) {
		t.Errorf("the wait sent %s with %d informers running: it polled instead of watching", d, e.Informers())
	}
}
