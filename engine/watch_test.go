package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// A run that only reads sends its lists and opens no watch: a plan reads
// the cluster as of its lists, one request per informer. Once the run
// writes, its informers watch from their lists on, so what it reads next
// shows its writes.
func TestAPlanOpensNoWatch(t *testing.T) {
	ctx := context.Background()
	first, _ := newEngine(t)
	zero := func(string, int) int { return 0 }
	hcl := readsStack("nowatch", []string{"nowatch-a"}, 2, zero)
	s := loadStack(t, "nowatch", hcl)
	mustApply(t, first, s)

	e, requests := engineCounting(t, "") // every request
	if p := mustPlan(t, e, s); p.HasChanges() {
		t.Fatalf("plan of the applied stack has changes:\n%s", planText(p))
	}
	if reads, watches := requests.count()-requests.watchCount(), requests.watchCount(); reads == 0 || watches != 0 {
		t.Fatalf("a plan that changes nothing sent %d requests besides %d watches, want its lists and no watch", reads, watches)
	}

	// The same run applies a change, then reads the workload back.
	changed := loadStack(t, "nowatch", strings.Replace(hcl, `cpu_request    = "1"`, `cpu_request    = "2"`, 1))
	mustApply(t, e, changed)
	if requests.watchCount() == 0 {
		t.Fatal("a run that wrote opened no watch: its reads could not wait for its writes")
	}
	w := changed.Workloads[0]
	got, err := e.ReadResource(ctx, schema.Workload.Type, w.ID(), w)
	if err != nil {
		t.Fatal(err)
	}
	if cpu := got.(*spec.Workload).Container.CPURequest; cpu != "2" {
		t.Errorf("read back after its apply: cpu_request %q, want the applied \"2\"", cpu)
	}
}
