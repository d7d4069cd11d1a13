package hclstack

import (
	"github.com/gpuslice/gpuslice/engine/diag"
)

// EvalOutputs evaluates the outputs again with computed resource attributes
// that apply learned (full address → attribute → value, e.g. a workload's
// node), so outputs that were "known after apply" get their values, also
// through modules.
func (c *Config) EvalOutputs(known map[string]map[string]string) ([]Output, diag.Diagnostics) {
	if c.root == nil {
		return c.Outputs, nil // none: compact kept what outputs need
	}
	diags := c.root.evalOutputs(c, known)
	c.Outputs = c.root.outputs
	return c.Outputs, diags
}
