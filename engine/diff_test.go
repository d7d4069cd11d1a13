package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/engine/plan"
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
