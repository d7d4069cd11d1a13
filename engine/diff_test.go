package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// changesOf returns the plan's changes that do something.
func changesOf(p *plan.Plan) []plan.Change {
	var out []plan.Change
	for _, c := range p.Changes {
		if c.Action != plan.NoOp {
			out = append(out, c)
		}
	}
	return out
}

// TestPlanDiffFollowsTheSchema: plan compares with the API server's own
// schema. Env is a list keyed by name, so its order is no change; a
// Service's ports are keyed by port and protocol, so a changed targetPort
// is one change of that item's field; memory written 1024Mi is stored as
// 1Gi, the same amount, so no change, while another amount is one; a
// variable dropped from the configuration is one removed item.
func TestPlanDiffFollowsTheSchema(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	const ns = "schema-diff"
	const threeVars = `OLLAMA_CONTEXT_LENGTH = "16384", OLLAMA_KEEP_ALIVE = "24h", OLLAMA_NUM_PARALLEL = "2"`
	hcl := func(memory, env string) string {
		h := stackHCL(ns, "")
		h = strings.Replace(h, `env            = { OLLAMA_CONTEXT_LENGTH = "16384" }`, `env            = { `+env+` }`, 1)
		return strings.Replace(h, `memory_request = "2Gi"`, `memory_request = "`+memory+`"`, 1)
	}
	s := loadStack(t, ns, hcl("1024Mi", threeVars))
	mustApply(t, e, s)
	t.Cleanup(func() { destroyStack(t, e, ns) })

	d, err := c.Client().AppsV1().Deployments(ns).Get(ctx, "ollama", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	container := d.Spec.Template.Spec.Containers[0]
	if mem := container.Resources.Requests[corev1.ResourceMemory]; mem.String() != "1Gi" {
		t.Fatalf("the API server stored memory %s, want 1Gi: the case below tests nothing", mem.String())
	}
	requireNoChanges(t, e, s)

	// Someone reorders the env list.
	env := slices.Clone(container.Env)
	slices.Reverse(env)
	if len(env) < 3 || slices.Equal(env, container.Env) {
		t.Fatalf("env %v: want several variables to reorder", container.Env)
	}
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template/spec/containers/0/env", "value": env}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().AppsV1().Deployments(ns).Patch(ctx, "ollama", types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if p := mustPlan(t, e, s); p.HasChanges() {
		t.Fatalf("a reordered env list planned changes:\n%s", planText(p))
	}

	// Someone points the Service at another port.
	if _, err := c.Client().CoreV1().Services(ns).Patch(ctx, "ollama", types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/spec/ports/0/targetPort","value":8080}]`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, e, s)
	ch := changesOf(p)
	if len(ch) != 1 || ch[0].Ref.Kind != "Service" || ch[0].Action != plan.Update || len(ch[0].Fields) != 1 {
		t.Fatalf("plan after changing the Service's targetPort, want one field of the Service:\n%s", planText(p))
	}
	f := ch[0].Fields[0]
	if got := fmt.Sprint(f.Path, ": ", f.Before, " → ", f.After); got != `.spec.ports[port=11434,protocol=TCP].targetPort: 8080 → 11434` {
		t.Errorf("field change = %s", got)
	}
	mustApply(t, e, s)
	requireNoChanges(t, e, s)

	// Another amount of memory is a change, shown as written.
	more := loadStack(t, ns, hcl("1536Mi", threeVars))
	p = mustPlan(t, e, more)
	ch = changesOf(p)
	if len(ch) != 1 || ch[0].Ref.Kind != "Deployment" || len(ch[0].Fields) != 1 ||
		ch[0].Fields[0].Path != `.spec.template.spec.containers[name=ollama].resources.requests.memory` ||
		ch[0].Fields[0].Before != "1Gi" || ch[0].Fields[0].After != "1536Mi" {
		t.Fatalf("plan of 1536Mi instead of 1024Mi:\n%s", planText(p))
	}

	// A variable gpuslice applied and the configuration no longer has is
	// one removal: the list item, keyed by its name.
	fewer := loadStack(t, ns, hcl("1024Mi", `OLLAMA_CONTEXT_LENGTH = "16384", OLLAMA_NUM_PARALLEL = "2"`))
	p = mustPlan(t, e, fewer)
	ch = changesOf(p)
	if len(ch) != 1 || ch[0].Ref.Kind != "Deployment" || len(ch[0].Fields) != 1 {
		t.Fatalf("plan without OLLAMA_KEEP_ALIVE:\n%s", planText(p))
	}
	f = ch[0].Fields[0]
	if got := fmt.Sprint(f.Path, ": ", f.Before, " → ", f.After); got != `.spec.template.spec.containers[name=ollama].env[name=OLLAMA_KEEP_ALIVE]: map[name:OLLAMA_KEEP_ALIVE value:24h] → <nil>` {
		t.Errorf("field change = %s", got)
	}

	// So is a field dropped, whether the rest reads as applied (1Gi, as
	// stored) or needs the schema to tell (1024Mi).
	for _, memory := range []string{"1Gi", "1024Mi"} {
		noLimit := loadStack(t, ns, strings.Replace(hcl(memory, threeVars), `memory_limit   = "4Gi"`, "", 1))
		p = mustPlan(t, e, noLimit)
		ch = changesOf(p)
		if len(ch) != 1 || ch[0].Ref.Kind != "Deployment" || len(ch[0].Fields) != 1 {
			t.Fatalf("plan of %s without memory_limit:\n%s", memory, planText(p))
		}
		f = ch[0].Fields[0]
		if got := fmt.Sprint(f.Path, ": ", f.Before, " → ", f.After); got != `.spec.template.spec.containers[name=ollama].resources.limits: map[memory:4Gi] → <nil>` {
			t.Errorf("%s without memory_limit: field change = %s", memory, got)
		}
	}
}

// openAPIRequests counts the OpenAPI v3 requests sent through a config,
// by path: the index (/openapi/v3) and each group-version's document.
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

// TestPlanFetchesOnlyTheSchemasItCompares: a plan fetches the API
// server's schema of each group-version it compares an object of, once,
// and no other: Prefetch (the provider's Configure) and a plan that only
// creates fetch none (not even the index), a plan of the applied stack the index and the documents of the
// kinds it compares (not batch/v1 or autoscaling/v2, which the stack does
// not render), each once however many objects share it. A new run reads
// the index again but no document that has not changed.
func TestPlanFetchesOnlyTheSchemasItCompares(t *testing.T) {
	c := clustertest.Shared(t)
	cfg := rest.CopyConfig(c.RESTConfig())
	requests := &openAPIRequests{got: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { requests.next = rt; return requests })
	e, err := engine.New(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	const ns = "schema-fetch"
	s := loadStack(t, ns, stackHCL(ns, ""))

	e.Prefetch()
	p := mustPlan(t, e, s)
	for _, ch := range p.Changes {
		if ch.Action != plan.Create {
			t.Fatalf("%s of %s: want a stack not applied yet", ch.Action, ch.Ref)
		}
	}
	if got := requests.take(); len(got) != 0 {
		t.Errorf("a plan that only creates fetched %v, want no schema", got)
	}
	if err := e.Apply(context.Background(), p, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { destroyStack(t, e, ns) })

	e.Refresh()
	requests.take()
	p = mustPlan(t, e, s)
	if p.HasChanges() {
		t.Fatalf("plan after apply:\n%s", planText(p))
	}
	want := map[string]int{"/openapi/v3": 1}
	for _, ch := range p.Changes {
		gv := ch.Rendered.GroupVersionKind().GroupVersion()
		path := "/openapi/v3/apis/" + gv.String()
		if gv.Group == "" {
			path = "/openapi/v3/api/" + gv.Version
		}
		want[path] = 1
	}
	for _, gv := range []string{"api/v1", "apis/apps/v1", "apis/resource.k8s.io/v1"} {
		if want["/openapi/v3/"+gv] != 1 {
			t.Fatalf("the plan compares no object of %s (%v): the stack is not the one this test means", gv, want)
		}
	}
	if got := requests.take(); !maps.Equal(got, want) {
		t.Errorf("a plan comparing %d objects fetched %v, want %v", len(p.Changes), got, want)
	}

	e.Refresh()
	requests.take()
	requireNoChanges(t, e, s)
	if got := requests.take(); len(got) != 1 || got["/openapi/v3"] != 1 {
		t.Errorf("the next run fetched %v, want the index only (no document changed)", got)
	}
}
