package provider

// ModifyPlan: the engine validates and checks the planned resource in its
// cluster context and plans its objects, so errors show at plan time on the
// attribute, and changes made outside Terraform that no attribute shows
// still plan an update.

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine"
	enginediag "github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/plan"
	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

func (r *gpusliceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.data == nil {
		return // destroy, or the provider is not configured yet
	}
	planned, err := tfvalue.ToCty(req.Plan.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the plan", err.Error())
		return
	}
	config, err := tfvalue.ToCty(req.Config.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the configuration", err.Error())
		return
	}
	prior := func() (cty.Value, bool) {
		v, err := tfvalue.ToCty(req.State.Raw)
		return v, err == nil && !v.IsNull()
	}
	res := r.planOnce(ctx, inferredFromConfig(planned, config, r.def.Block), prior)
	resp.Diagnostics.Append(res.Diagnostics...)
	for name, v := range res.Set {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(name), tfvalue.Primitive(v))...)
	}
}

// inferredFromConfig is planned with each inferred argument as the
// configuration sets it: Terraform plans one left out as its value in the
// state (or unknown), which the engine must infer afresh, not take for
// the user's (a package's memory from its fraction, after the fraction
// changed).
func inferredFromConfig(planned, config cty.Value, b engineschema.Block) cty.Value {
	if planned.IsNull() || !planned.IsKnown() || config.IsNull() || !config.IsKnown() {
		return planned
	}
	attrs := planned.AsValueMap()
	for _, a := range b.Attributes {
		if a.Inferred && config.Type().HasAttribute(a.Name) {
			attrs[a.Name] = config.GetAttr(a.Name)
		}
	}
	return cty.ObjectVal(attrs)
}

// PlanValue is ModifyPlan of a plan equal to the state, for the fast path.
func (r *gpusliceResource) PlanValue(ctx context.Context, planned, config cty.Value) fastpath.PlanResult {
	planned = inferredFromConfig(planned, config, r.def.Block)
	return r.planOnce(ctx, planned, func() (cty.Value, bool) { return planned, true })
}

// planOnce is planValues done once per request (fastpath.Once): when
// ModifyPlan and the fast path both serve it, both answer from one
// reading of the cluster.
func (r *gpusliceResource) planOnce(ctx context.Context, planned cty.Value, prior func() (cty.Value, bool)) fastpath.PlanResult {
	return fastpath.Once(ctx, planned, func() fastpath.PlanResult {
		var diags diag.Diagnostics
		set := r.planValues(ctx, planned, prior, &diags)
		return fastpath.PlanResult{Set: set, Diagnostics: diags}
	})
}

// planValues is ModifyPlan on the planned value (prior gives the state's,
// false on create): the computed attributes to set on the plan.
func (r *gpusliceResource) planValues(ctx context.Context, planned cty.Value, prior func() (cty.Value, bool), diags *diag.Diagnostics) map[string]cty.Value {
	defer r.data.logRequests(ctx, "plan "+r.def.Type)
	if !argumentsKnown(planned, r.def.Block) {
		return nil // checked again at apply, when every value is known
	}
	target := r.decode(planned, diags)
	if target == nil {
		return nil
	}
	set := map[string]cty.Value{}
	for name, v := range target.PlannedAttributes() {
		set[name] = v
	}

	e, rc, skipped := r.clusterContext(ctx, target)
	own := spec.StackOf(target)
	if e == nil && len(own.Workloads) == 0 {
		// (The workload checks say it themselves, naming what they skip.)
		diags.AddWarning("Cluster checks skipped", skipped+"; ownership and drift are checked once the cluster can be read")
	}
	refs := own.PackageRefs()
	var names []string
	for _, ref := range refs {
		names = append(names, ref.Name)
	}
	ds := engine.ValidateResource(target, rc, r.data.tables.GPUModels, names...)
	if e != nil {
		ds = append(ds, missingPackages(refs, rc)...)
	}
	if !ds.HasErrors() {
		ds = append(ds, engine.CheckResource(ctx, e, target, rc, r.data.tables, skipped)...)
	}
	tfvalue.AddDiagnostics(diags, ds)
	if ds.HasErrors() || e == nil {
		return set
	}
	p, err := e.PlanResource(ctx, target, rc, r.data.tables.GPUModels, plan.Options{})
	if err != nil {
		diags.AddWarning("Cannot plan against the cluster", err.Error())
		return set
	}
	tfvalue.AddDiagnostics(diags, p.Diagnostics)
	// Drift: Terraform sees no change but the cluster differs (objects
	// changed or deleted outside Terraform in ways no attribute shows);
	// apply restores them.
	if !p.HasChanges() {
		return set
	}
	if state, ok := prior(); ok && sameArguments(r.def, state, planned) {
		for name, v := range r.unknownOnChange(target) {
			set[name] = v
		}
		diags.AddWarning("Objects differ from what gpuslice renders", "they were changed outside Terraform, or this version of gpuslice renders them differently "+
			"(after an upgrade, e.g. a new admission policy); apply brings them in line:\n"+describeChanges(p))
	}
	return set
}

// clusterContext returns the engine (nil when the cluster cannot be asked;
// skipped then says why) and what the cluster and this run's planned
// packages say around the resource.
func (r *gpusliceResource) clusterContext(ctx context.Context, target spec.Resource) (*engine.Engine, engine.ResourceContext, string) {
	e, skipped := r.data.engine, r.data.skipped
	var rc engine.ResourceContext
	if e != nil {
		var err error
		if rc, err = e.LoadResourceContext(ctx); err != nil {
			e, skipped = nil, fmt.Sprintf("the cluster could not be read (%v)", err)
		}
	}
	if own := spec.StackOf(target).Packages; len(own) > 0 {
		r.data.planned.add(own...)
	} else {
		rc = r.data.planned.extend(rc)
	}
	return e, rc, skipped
}

// missingPackages warns about packages a quota or workload uses that the
// cluster does not have yet: fine when this apply creates them.
func missingPackages(refs []spec.PackageRef, rc engine.ResourceContext) enginediag.Diagnostics {
	have := map[string]bool{}
	for _, n := range rc.PackageNames() {
		have[n] = true
	}
	var out enginediag.Diagnostics
	for _, ref := range refs {
		if have[ref.Name] {
			continue
		}
		out = append(out, enginediag.Warningf("", ref.Attribute, "Package not in the cluster yet",
			"no gpuslice_package named %q is applied; this is fine when this apply creates it, otherwise fix the name", ref.Name))
	}
	return out
}

func describeChanges(p *plan.Plan) string {
	var b strings.Builder
	for _, c := range p.Changes {
		if c.Action == plan.NoOp {
			continue
		}
		fmt.Fprintf(&b, "  %s %s", c.Action, c.Ref)
		var fields []string
		for _, f := range c.Fields {
			fields = append(fields, f.Path)
		}
		if len(fields) > 0 {
			fmt.Fprintf(&b, ": %s", strings.Join(fields, ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// sameArguments reports whether two resource values set the same arguments
// (inferred ones follow from the others).
func sameArguments(def engineschema.Resource, a, b cty.Value) bool {
	for _, attr := range def.Attributes {
		if attr.Computed || attr.Inferred {
			continue
		}
		if !a.GetAttr(attr.Name).RawEquals(b.GetAttr(attr.Name)) {
			return false
		}
	}
	for _, nb := range def.Blocks {
		if !a.GetAttr(nb.Name).RawEquals(b.GetAttr(nb.Name)) {
			return false
		}
	}
	return true
}
