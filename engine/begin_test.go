package engine_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// pathRequests counts the requests sent through a config to paths that
// end as suffix, and of them the watches.
type pathRequests struct {
	next       http.RoundTripper
	suffix     string
	mu         sync.Mutex
	n, watches int
}

func (r *pathRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, r.suffix) {
		r.mu.Lock()
		r.n++
		if req.URL.Query().Get("watch") == "true" {
			r.watches++
		}
		r.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

func (r *pathRequests) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *pathRequests) watchCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.watches
}

// engineCounting is an engine of its own (a new process's) whose requests
// to suffix are counted.
func engineCounting(t *testing.T, suffix string) (*engine.Engine, *pathRequests) {
	t.Helper()
	cfg := rest.CopyConfig(clustertest.Shared(t).RESTConfig())
	requests := &pathRequests{suffix: suffix}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { requests.next = rt; return requests })
	e, err := engine.New(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, requests
}

// TestBeginReadsTheStackBeforeItsConfiguration: Begin, called while the
// CLI loads the configuration, reads the stack's inventory and starts
// reading the kinds it names in their namespaces, with their schemas; the
// plan that follows
// continues that run (it reads the stack's Deployments once, as a plan
// alone does, and finds nothing to change), while a plan of another stack
// starts afresh.
func TestBeginReadsTheStackBeforeItsConfiguration(t *testing.T) {
	e, _ := newEngine(t)
	const ns = "begin-run"
	s := loadStack(t, ns, stackHCL(ns, ""))
	mustApply(t, e, s)
	t.Cleanup(func() { destroyStack(t, e, ns) })
	deployments := "/namespaces/" + ns + "/deployments"

	alone, aloneRequests := engineCounting(t, deployments)
	requireNoChanges(t, alone, s)
	if aloneRequests.count() == 0 {
		t.Fatalf("a plan of %s read no Deployments there: the stack is not the one this test means", ns)
	}

	begun, begunRequests := engineCounting(t, deployments)
	begun.Begin(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return begunRequests.count() == aloneRequests.count(), nil
	}); err != nil {
		t.Fatalf("Begin read %s's Deployments %d times, want %d as the plan does: %v", ns, begunRequests.count(), aloneRequests.count(), err)
	}
	requireNoChanges(t, begun, s)
	if got, want := begunRequests.count(), aloneRequests.count(); got != want {
		t.Errorf("Begin and the plan after it read %s's Deployments with %d requests, a plan alone with %d: the plan did not continue Begin's run", ns, got, want)
	}

	begun.Begin("another-stack")
	requireNoChanges(t, begun, s)
	if got, want := begunRequests.count(), 2*aloneRequests.count(); got != want {
		t.Errorf("a plan after Begin of another stack read %s's Deployments with %d requests in all, want %d: it must read afresh", ns, got, want)
	}

	// The schema of a kind the stack applied is fetched by Begin, once.
	typed, schemaRequests := engineCounting(t, "/openapi/v3/apis/apps/v1")
	typed.Begin(ns)
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return schemaRequests.count() > 0, nil
	}); err != nil {
		t.Fatalf("Begin did not fetch the schema of apps/v1, whose Deployments the stack applied: %v", err)
	}
	requireNoChanges(t, typed, s)
	if got := schemaRequests.count(); got != 1 {
		t.Errorf("Begin and the plan after it fetched the schema of apps/v1 %d times, want once", got)
	}
}
