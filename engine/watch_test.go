package engine_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// requestCounter counts the list and watch requests sent through it.
type requestCounter struct {
	next           http.RoundTripper
	lists, watches *atomic.Int64
}

func (c requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		if r.URL.Query().Get("watch") == "true" {
			c.watches.Add(1)
		} else {
			c.lists.Add(1)
		}
	}
	return c.next.RoundTrip(r)
}

// A run that only reads sends its lists and opens no watch: a plan reads
// the cluster as of its lists, one request per informer. Once the run
// writes, its informers watch from their lists on, so what it reads next
// shows its writes.
func TestAPlanOpensNoWatch(t *testing.T) {
	ctx := context.Background()
	first, c := newEngine(t)
	zero := func(string, int) int { return 0 }
	hcl := readsStack("nowatch", []string{"nowatch-a"}, 2, zero)
	s := loadStack(t, "nowatch", hcl)
	mustApply(t, first, s)

	var reads, watches atomic.Int64
	cfg := rest.CopyConfig(c.RESTConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return requestCounter{rt, &reads, &watches} })
	e, err := engine.New(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if p := mustPlan(t, e, s); p.HasChanges() {
		t.Fatalf("plan of the applied stack has changes:\n%s", planText(p))
	}
	if reads.Load() == 0 || watches.Load() != 0 {
		t.Fatalf("a plan that changes nothing sent %d list and get requests and %d watches, want its lists and no watch", reads.Load(), watches.Load())
	}

	// The same run applies a change, then reads the workload back.
	changed := loadStack(t, "nowatch", strings.Replace(hcl, `cpu_request    = "1"`, `cpu_request    = "2"`, 1))
	mustApply(t, e, changed)
	if watches.Load() == 0 {
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
