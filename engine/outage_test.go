package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// Issue 17, item 4: the API server crashes (SIGKILL, started again once
// the apply gave up) at 20 points spread over applies of 400 changes
// (creates, then prunes), and etcd restarts under 3 more. After each
// outage: no orphan and no duplicate; one further apply converges with the
// inventory equal to what exists. The target alternates between two
// configurations of one stack, so every apply has 200+ changes to make.
func TestApplySurvivesOutages(t *testing.T) {
	testenv.Short(t, "23 outages of the local control plane")
	// A cluster of its own: the outages would disturb the other tests.
	c := clustertest.Start(t, cluster.Options{})
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	configs := []struct{ prefix, context string }{{"a", "4096"}, {"b", "8192"}}
	type outage struct {
		name string
		at   int
		// do runs when the apply has made at changes; after, once the
		// apply has returned.
		do, after func() error
	}
	none := func() error { return nil }
	var outages []outage
	for k := range 20 {
		// Killed until the apply gives up: every write after the point
		// fails, including the inventory's last one.
		outages = append(outages, outage{"API server killed", 1 + k*20, func() error { c.KillAPIServer(); return nil }, func() error { return c.StartAPIServer(ctx) }})
	}
	for _, at := range []int{15, 150, 330} {
		// Restarted under the apply's feet: writes in flight stall, then
		// go on or fail.
		outages = append(outages, outage{"etcd restarted", at, func() error { c.StopEtcd(5 * time.Second); return c.StartEtcd(ctx) }, none})
	}
	for i, o := range outages {
		cfg := configs[i%2]
		s := cheapStack("outages", "outages", cfg.prefix, 100, cfg.context)
		p := mustPlan(t, e, s)
		var mu sync.Mutex
		applied, hit := 0, false
		var outageErr error
		err := e.Apply(ctx, p, apply.Options{Progress: func(ev apply.Event) {
			mu.Lock()
			defer mu.Unlock()
			if ev.Err == nil {
				applied++
			}
			if applied >= o.at && !hit {
				hit = true
				outageErr = o.do()
			}
		}})
		if err := o.after(); err != nil {
			t.Fatalf("outage %d (%s): %v", i, o.name, err)
		}
		if outageErr != nil {
			t.Fatalf("outage %d (%s): %v", i, o.name, outageErr)
		}
		if !hit {
			t.Fatalf("outage %d: the apply made only %d changes, fewer than %d", i, applied, o.at)
		}
		changes := 0
		for _, ch := range p.Changes {
			if ch.Action != plan.NoOp {
				changes++
			}
		}
		t.Logf("outage %d: %s after %d of %d changes; apply: %v", i, o.name, o.at, changes, firstLineOf(err))
		stackState(t, e, c, s, false)
		mustApply(t, e, s)
		stackState(t, e, c, s, true)
		if t.Failed() {
			t.FailNow()
		}
	}
}

func firstLineOf(err error) string {
	if err == nil {
		return "succeeded"
	}
	return firstLine(err)
}
