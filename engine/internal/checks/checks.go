// Package checks runs the plan-time checks: the lessons of a real shared-V100
// deployment (an image that no longer runs on Volta, a container RAM limit
// that gets the runtime OOMKilled, a context that does not fit the slice or
// is silently cut, models lost on restart, a quota that leaves the pod
// unstarted, no free slice) reported on the exact attribute before apply.
//
// The checks are pure: Run reads the stack, the data tables and the facts
// Gather read from the cluster. Without facts (cluster unreachable, values
// unknown at plan time) the checks that need the cluster are skipped with a
// warning saying so.
package checks

import (
	"fmt"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// Run checks every workload of the stack. facts is nil when the cluster
// could not be asked; skipped then says why, for the warning.
func Run(s *spec.Stack, t *tables.Set, facts *Facts, skipped string) diag.Diagnostics {
	c := &checker{stack: s, tables: t, facts: facts}
	for _, w := range s.Workloads {
		pkg := c.packageOf(w.Package)
		c.image(w, pkg)
		c.memory(w)
		c.fit(w, pkg)
		c.wholeGPUs(w, pkg)
		c.storage(w)
	}
	if facts != nil {
		c.quotas()
		c.capacity()
		c.keda()
		c.trainingOperator()
		c.sharing()
	} else if skipped != "" && len(s.Workloads) > 0 {
		c.add(diag.Diagnostic{Severity: diag.Warning, Summary: "Cluster checks skipped",
			Detail: fmt.Sprintf("%s; quota headroom and free slices were not checked. They run at the next plan that reaches the cluster.", skipped)})
	}
	return c.diags
}

type checker struct {
	stack  *spec.Stack
	tables *tables.Set
	facts  *Facts
	diags  diag.Diagnostics
}

func (c *checker) add(d diag.Diagnostic) { c.diags = append(c.diags, d) }

func (c *checker) errorf(w *spec.Workload, attr, summary, format string, args ...any) {
	c.add(diag.Diagnostic{Severity: diag.Error, Address: w.Address, Attribute: attr, Summary: summary, Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) warnf(w *spec.Workload, attr, summary, format string, args ...any) {
	c.add(diag.Diagnostic{Severity: diag.Warning, Address: w.Address, Attribute: attr, Summary: summary, Detail: fmt.Sprintf(format, args...)})
}

// Package is a workload's package as the checks see it: its name, model,
// kind and slice size, resolved.
type Package = spec.Package

// packageOf finds the package in the stack, else among the cluster's
// DeviceClasses (the provider checks one resource at a time).
func (c *checker) packageOf(name string) *Package { return packageOf(c.stack, c.facts, name) }

func packageOf(s *spec.Stack, facts *Facts, name string) *Package {
	for _, p := range s.Packages {
		if p.Name == name {
			return p
		}
	}
	if facts != nil {
		if p, ok := facts.Packages[name]; ok {
			return p
		}
	}
	return nil
}

// computeCapability of a GPU model: what the cluster's devices say, else the
// GPU model table.
func (c *checker) computeCapability(model string) string {
	if c.facts != nil {
		if cc := c.facts.ComputeCapability[model]; cc != "" {
			return cc
		}
	}
	return c.tables.GPUModels[model].ComputeCapability
}

// runtimeOf is the serving runtime of the workload's image, if the tables
// know it.
func (c *checker) runtimeOf(w *spec.Workload) (tables.Runtime, bool) {
	return c.tables.RuntimeFor(parseImage(w.Container.Image).Repository)
}
