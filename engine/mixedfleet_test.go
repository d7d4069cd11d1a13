package engine_test

import (
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// examples/mixed-fleet declares V100 slices and A100 MIG packages for two
// teams in one configuration: it loads and passes every plan-time check
// that needs no cluster with no error, its packages are the kinds and
// sizes it says, and its slices output says which isolation holds each.
// (TestRenderedConfigsAreAdmitted admits what it renders.)
func TestMixedFleetExample(t *testing.T) {
	c, diags := hclstack.Load("../examples/mixed-fleet", hclstack.Options{VarOptions: hclstack.VarOptions{Vars: []string{"wait_for=scheduled"}, Env: []string{}}})
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	if ds := engine.CheckOffline(c.Stack, tables.Builtin()); ds.HasErrors() {
		t.Fatalf("plan-time checks: %v", ds.Err())
	}
	want := map[string]struct {
		kind, isolation string
		memoryBytes     int64
	}{
		"v100-8gi":  {contract.SharingPartition, contract.IsolationSoftware, 8 << 30},
		"v100-16gi": {contract.SharingPartition, contract.IsolationSoftware, 16 << 30},
		"a100-1g":   {contract.SharingMIG, contract.IsolationHardware, 4864 << 20},
		"a100-3g":   {contract.SharingMIG, contract.IsolationHardware, 19968 << 20},
	}
	for _, p := range c.Stack.Packages {
		w, ok := want[p.Name]
		if !ok || p.Kind() != w.kind || p.Isolation() != w.isolation || p.MemoryBytes != w.memoryBytes {
			t.Errorf("package %s: %s, %s, %d bytes; want %+v", p.Name, p.Kind(), p.Isolation(), p.MemoryBytes, w)
		}
		delete(want, p.Name)
	}
	if len(want) > 0 {
		t.Errorf("packages missing: %v", want)
	}
	teams := map[string]int{}
	for _, w := range c.Stack.Workloads {
		teams[w.Namespace]++
	}
	if len(teams) != 2 || teams["team-chat"] != 2 || teams["team-research"] != 2 {
		t.Errorf("workloads per team: %v", teams)
	}
	outs, ds := c.EvalOutputs(nil)
	if ds.HasErrors() {
		t.Fatal(ds.Err())
	}
	for _, o := range outs {
		if o.Name != "slices" {
			continue
		}
		got := map[string]string{}
		for k, v := range o.Value.AsValueMap() {
			if v.Type() == cty.String && v.IsKnown() {
				got[k] = v.AsString()
			}
		}
		if got["a100-1g"] != "4864Mi, 14 % compute, MIG 1g.5gb: hardware isolation" || got["v100-8gi"] != "8Gi, 25 % compute, software isolation" {
			t.Errorf("slices output = %v", got)
		}
		return
	}
	t.Error("no slices output")
}
