package view_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// openAPIRequests counts the OpenAPI v3 requests a config sends: the
// index (/openapi/v3) and each group-version's document.
type openAPIRequests struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  map[string]int
}

func (o *openAPIRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/openapi/v3") {
		o.mu.Lock()
		o.got[r.URL.Path]++
		o.mu.Unlock()
	}
	return o.next.RoundTrip(r)
}

func (o *openAPIRequests) take() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.got
	o.got = map[string]int{}
	return got
}

func counted(t testing.TB, c *cluster.Cluster) (*view.View, *openAPIRequests) {
	cfg := rest.CopyConfig(c.RESTConfig())
	o := &openAPIRequests{got: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { o.next = rt; return o })
	v := view.New(dynamic.NewForConfigOrDie(cfg), cfg)
	t.Cleanup(v.Close)
	return v, o
}

var deploymentKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

// Types reads the OpenAPI index once per run and each group-version's
// document once, however many readers ask at once; a new run reads the
// index again but not an unchanged document; a kind whose CRD appeared
// after the index was read is found; an unknown group-version is an error
// that says what to do.
func TestTypes(t *testing.T) {
	c := clustertest.Start(t, cluster.Options{})
	ctx := context.Background()
	v, requests := counted(t, c)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := v.Types(ctx, deploymentKind); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := v.Types(ctx, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}); err != nil {
		t.Fatal(err)
	}
	if got := requests.take(); len(got) != 3 || got["/openapi/v3"] != 1 || got["/openapi/v3/apis/apps/v1"] != 1 || got["/openapi/v3/api/v1"] != 1 {
		t.Fatalf("requests of the first run = %v, want the index, apps/v1 and v1 once each", got)
	}

	v.Reset()
	types, err := v.Types(ctx, deploymentKind)
	if err != nil {
		t.Fatal(err)
	}
	if got := requests.take(); len(got) != 1 || got["/openapi/v3"] != 1 {
		t.Fatalf("requests of the second run = %v, want the index only (apps/v1 has not changed)", got)
	}
	d := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "x"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a", "bogus": true}}}}}}}
	if _, err := types.ObjectToTyped(d); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("a container field the schema lacks: %v, want an error naming it", err)
	}

	_, err = v.Types(ctx, schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"})
	if err == nil || !strings.Contains(err.Error(), "publishes no OpenAPI v3 schema of keda.sh/v1alpha1") || !strings.Contains(err.Error(), "plan again") {
		t.Fatalf("a group-version not served: %v", err)
	}
	clustertest.ServeCRD(t, c.RESTConfig(), clustertest.ScaledObject)
	types, err = v.Types(ctx, schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"})
	if err != nil {
		t.Fatalf("the ScaledObject schema, installed within the run: %v", err)
	}
	so := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": map[string]any{"name": "x"},
		"spec": map[string]any{"scaleTargetRef": map[string]any{"name": "x"}, "triggers": []any{map[string]any{"type": "cpu", "metadata": map[string]any{"value": "50"}}}}}}
	if _, err := types.ObjectToTyped(so); err != nil {
		t.Errorf("a ScaledObject read with KEDA's schema: %v", err)
	}
}

// BenchmarkTypes is what a run pays for the schemas plan compares with:
// fetching and parsing, in a new view (a new process), the documents of
// each group-version alone and of those a plan of packages, quotas and
// Deployment workloads compares (core, apps, resource.k8s.io: "plan"); and
// in a later run of the same view, which reads only the index.
func BenchmarkTypes(b *testing.B) {
	c := clustertest.Start(b, cluster.Options{})
	ctx := context.Background()
	all := func(v *view.View, gvs []schema.GroupVersion) {
		v.WarmTypes(gvs...)
		for _, gv := range gvs {
			if _, err := v.Types(ctx, gv.WithKind("")); err != nil {
				b.Fatal(err)
			}
		}
	}
	core, apps, dra := schema.GroupVersion{Version: "v1"}, schema.GroupVersion{Group: "apps", Version: "v1"}, schema.GroupVersion{Group: "resource.k8s.io", Version: "v1"}
	plan := []schema.GroupVersion{core, apps, dra}
	type group struct {
		name string
		gvs  []schema.GroupVersion
	}
	groups := []group{{"plan", plan}}
	for _, gv := range slices.Concat(plan, []schema.GroupVersion{{Group: "batch", Version: "v1"}, {Group: "autoscaling", Version: "v2"}}) {
		groups = append(groups, group{gv.String(), []schema.GroupVersion{gv}})
	}
	for _, g := range groups {
		b.Run("new/"+g.name, func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				v, _ := counted(b, c)
				all(v, g.gvs)
				v.Close()
			}
		})
	}
	b.Run("next-run/plan", func(b *testing.B) {
		v, _ := counted(b, c)
		all(v, plan)
		defer reportCPU(b)()
		for b.Loop() {
			v.Reset()
			all(v, plan)
		}
	})
}

// reportCPU reports the CPU time the process (the client: fetching,
// decoding, converting) spent per operation, steadier than the wall-clock
// time on a shared machine; call its result when the loop is done.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var u syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
			b.Fatal(err)
		}
		return time.Duration(u.Utime.Nano() + u.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64((cpu()-start).Milliseconds())/float64(b.N), "cpu-ms/op")
	}
}
