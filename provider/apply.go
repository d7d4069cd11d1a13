package provider

// Create and Update: plan the resource's objects, apply them, wait for a
// workload, record the state.

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

func (r *gpusliceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.applyPlan(ctx, req.Plan.Raw, func(ctx context.Context, d time.Duration) (time.Duration, diag.Diagnostics) {
		var t timeouts.Value
		if diags := req.Plan.GetAttribute(ctx, path.Root("timeouts"), &t); diags.HasError() {
			return d, diags
		}
		return t.Create(ctx, d)
	}, &resp.State, resp.Identity, &resp.Diagnostics)
}

func (r *gpusliceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.applyPlan(ctx, req.Plan.Raw, func(ctx context.Context, d time.Duration) (time.Duration, diag.Diagnostics) {
		var t timeouts.Value
		if diags := req.Plan.GetAttribute(ctx, path.Root("timeouts"), &t); diags.HasError() {
			return d, diags
		}
		return t.Update(ctx, d)
	}, &resp.State, resp.Identity, &resp.Diagnostics)
}

// applyPlan carries out the planned value: plan the resource's objects,
// apply them, wait for a workload, and record the state.
func (r *gpusliceResource) applyPlan(ctx context.Context, raw tftypes.Value, timeout func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), state *tfsdk.State, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	e := r.engine(diags)
	if e == nil {
		return
	}
	defer r.data.logRequests(ctx, "apply "+r.def.Type)
	planned, err := tfvalue.ToCty(raw)
	if err != nil {
		diags.AddError("Cannot read the plan", err.Error())
		return
	}
	target := r.decode(planned, diags)
	if target == nil {
		return
	}
	if r.def.Waits {
		d, ds := timeout(ctx, defaultApplyTimeout(target))
		diags.Append(ds...)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	rc, err := e.LoadResourceContext(ctx)
	if err != nil {
		diags.AddError("Cannot read the cluster", err.Error())
		return
	}
	if len(spec.StackOf(target).Packages) == 0 {
		rc = r.data.planned.extend(rc)
	}
	unlock, err := lockResource(ctx, e, target, "apply")
	if err != nil {
		diags.AddError("Error acquiring the state lock", err.Error())
		return
	}
	p, err := e.PlanResource(ctx, target, rc, r.data.tables.GPUModels, plan.Options{})
	if err != nil {
		unlock()
		diags.AddError("Cannot plan against the cluster", err.Error())
		return
	}
	tfvalue.AddDiagnostics(diags, p.Diagnostics)
	if p.Diagnostics.HasErrors() {
		unlock()
		return
	}
	wctx, cancel := writeContext(ctx)
	err = e.Apply(wctx, p, apply.Options{Stop: ctx, Writer: plan.Writer{Who: "terraform (" + target.Addr() + ")"}})
	cancel()
	unlock()
	if err != nil {
		diags.AddError("Apply failed", err.Error())
		return
	}
	var waitErr error
	var waited map[string]status.Status
	if wait := engine.Changed(spec.StackOf(target), p); len(wait) > 0 {
		waited, waitErr = e.Wait(ctx, wait, nil)
	}
	r.record(ctx, e, planned, target, waited, waitErr, state, identity, diags)
}

// record writes the applied target's state and says how its wait ended.
func (r *gpusliceResource) record(ctx context.Context, e *engine.Engine, planned cty.Value, target spec.Resource, waited map[string]status.Status, waitErr error,
	state *tfsdk.State, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	// OpenTofu stopped (SIGTERM to a runner pod, Ctrl-C) while apply
	// waited: the objects are applied, and are recorded with their status,
	// read in a short context of its own. Not an error of the resource:
	// one would mark a created workload tainted, and the next run would
	// replace it (rerun a job) for nothing but the interruption.
	interrupted := waitErr != nil && errors.Is(ctx.Err(), context.Canceled)
	if interrupted {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
	}
	out, err := tfvalue.FromCty(r.stateValue(ctx, e, planned, target, waited[target.Addr()].RanOn(), diags), state.Raw.Type())
	if err != nil {
		diags.AddError("Cannot record the state", err.Error())
		return
	}
	state.Raw = out
	r.setIdentity(ctx, identity, target.ID(), diags)
	switch {
	case interrupted:
		diags.AddWarning("Apply interrupted", "OpenTofu stopped while waiting for "+target.Addr()+": its objects are applied and recorded, not yet ready. "+
			"`gpuslice status` shows how it is doing; the next apply waits again only if it changes.")
	case waitErr != nil:
		diags.AddError("Workload not ready", waitErr.Error()+"\n\nThe objects are applied; fix the cause (or set wait_for) and apply again.")
	}
}

// recordTimeout bounds reading a workload's status for the state after
// OpenTofu was stopped.
const recordTimeout = 10 * time.Second

// stateValue is the state to record: value's arguments with the computed
// attributes of the applied target, those known at plan and the status the
// cluster reports.
func (r *gpusliceResource) stateValue(ctx context.Context, e *engine.Engine, value cty.Value, target spec.Resource, ranOn status.RanOn, diags *diag.Diagnostics) cty.Value {
	computed := target.PlannedAttributes()
	st, ok, err := e.ResourceStatus(ctx, target)
	if err != nil {
		diags.AddWarning("Cannot read the status", err.Error())
	}
	if ok {
		for k, v := range st.Keeping(ranOn).Attributes() {
			computed[k] = cty.StringVal(v)
		}
	}
	attrs := value.AsValueMap()
	for k, v := range computed {
		attrs[k] = v
	}
	// Computed attributes nothing filled in are recorded as null, never
	// unknown.
	for name, v := range attrs {
		if !v.IsKnown() {
			attrs[name] = cty.NullVal(v.Type())
		}
	}
	return cty.ObjectVal(attrs)
}
