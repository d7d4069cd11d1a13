package config

import (
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/diag"
)

// EvalOutputs evaluates the outputs again with computed resource attributes
// that apply learned (address → attribute → value, e.g. a workload's node),
// so outputs that were "known after apply" get their values.
func (c *Config) EvalOutputs(known map[string]map[string]string) ([]Output, diag.Diagnostics) {
	for addr, attrs := range known {
		n, ok := c.graph.nodes[addr]
		if !ok || n.value == cty.NilVal || !n.value.Type().IsObjectType() {
			continue
		}
		m := n.value.AsValueMap()
		for name, v := range attrs {
			if old, ok := m[name]; ok && !old.IsKnown() {
				m[name] = cty.StringVal(v)
			}
		}
		n.value = cty.ObjectVal(m)
	}
	order, diags := c.graph.order()
	if diags.HasErrors() {
		return nil, diags
	}
	ev := &evaluator{dir: c.absDir, g: c.graph, models: c.models}
	for _, n := range order {
		if n.kind == kindLocal || n.kind == kindOutput {
			v, ds := ev.expr(n, n.expr)
			diags = append(diags, ds...)
			n.value = v
		}
	}
	out := make([]Output, len(c.Outputs))
	for i, o := range c.Outputs {
		o.Value = c.graph.nodes["output."+o.Name].value
		out[i] = o
	}
	return out, diags
}
