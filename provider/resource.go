package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/config"
	enginediag "github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/plan"
	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// typeOps are what differs between the resource types; everything else is
// the same engine call for all four (gpuslice_<type>.go fill these in).
type typeOps struct {
	// read reads the resource with this id back from the cluster (prior,
	// when known, supplies what the cluster does not record); nil when gone.
	read func(ctx context.Context, c kubernetes.Interface, id string, prior any) (any, error)
	// importAttributes checks an import ID and returns the arguments it sets.
	importAttributes func(id string) (map[string]string, error)
	// computed returns the computed attributes of an applied resource.
	computed func(ctx context.Context, e *engine.Engine, target any) (map[string]cty.Value, error)
	// plannedComputed returns the computed attributes known at plan time.
	plannedComputed func(target any) map[string]cty.Value
	// unknownOnChange lists computed attributes apply may change.
	unknownOnChange []string
	// identity names the attributes of the resource identity, in import ID
	// order (joined by "/").
	identity []string
	// timeouts adds a timeouts block; wait is the default wait for create
	// and update.
	timeouts bool
	wait     func(target any) time.Duration
}

type gpusliceResource struct {
	def  engineschema.Resource
	ops  typeOps
	data *clusterData
}

var (
	_ resource.ResourceWithModifyPlan  = (*gpusliceResource)(nil)
	_ resource.ResourceWithImportState = (*gpusliceResource)(nil)
	_ resource.ResourceWithConfigure   = (*gpusliceResource)(nil)
)

func newResource(def engineschema.Resource) resource.Resource {
	ops := map[string]typeOps{
		engineschema.Platform.Type: platformOps, engineschema.Package.Type: packageOps,
		engineschema.Quota.Type: quotaOps, engineschema.Workload.Type: workloadOps,
	}[def.Type]
	return &gpusliceResource{def: def, ops: ops}
}

func (r *gpusliceResource) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = r.def.Type
}

func (r *gpusliceResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = resourceSchema(r.def)
	if r.ops.timeouts {
		resp.Schema.Blocks["timeouts"] = timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true})
	}
}

func (r *gpusliceResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return
	}
	data, ok := req.ProviderData.(*clusterData)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("got %T; this is a bug in the gpuslice provider", req.ProviderData))
		return
	}
	r.data = data
}

// engine returns the engine, or reports why there is no cluster.
func (r *gpusliceResource) engine(diags *diag.Diagnostics) *engine.Engine {
	if r.data == nil || r.data.engine == nil {
		reason := "the provider is not configured"
		if r.data != nil {
			reason = r.data.skipped
		}
		diags.AddError("No cluster", reason+"; configure the provider's cluster connection (config_path, host, … or KUBE_CONFIG_PATH) to apply")
		return nil
	}
	return r.data.engine
}

// decode converts a plan or state value to the resource's spec, with its
// engine address set.
func (r *gpusliceResource) decode(v cty.Value, diags *diag.Diagnostics) any {
	target, ds := config.DecodeResource(r.def, r.def.Type, v)
	addDiagnostics(diags, ds)
	if ds.HasErrors() {
		return nil
	}
	engine.ResolveResource(target, r.data.tables.GPUModels)
	setAddress(target, engine.ResourceAddress(r.def.Type, config.ResourceID(target)))
	return target
}

func (r *gpusliceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.data == nil {
		return // destroy, or the provider is not configured yet
	}
	planned, err := toCty(req.Plan.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the plan", err.Error())
		return
	}
	if !argumentsKnown(planned, r.def.Block) {
		return // checked again at apply, when every value is known
	}
	target := r.decode(planned, &resp.Diagnostics)
	if target == nil {
		return
	}
	r.setPlanned(ctx, resp, map[string]cty.Value{"id": cty.StringVal(config.ResourceID(target))})
	if r.ops.plannedComputed != nil {
		r.setPlanned(ctx, resp, r.ops.plannedComputed(target))
	}

	e := r.data.engine
	var rc engine.ResourceContext
	skipped := r.data.skipped
	if e != nil {
		if rc, err = e.LoadResourceContext(ctx); err != nil {
			skipped = fmt.Sprintf("the cluster could not be read (%v)", err)
			e = nil
		}
	}
	if _, isWorkload := target.(*spec.Workload); e == nil && !isWorkload {
		// (The workload checks say it themselves, naming what they skip.)
		resp.Diagnostics.AddWarning("Cluster checks skipped", skipped)
	}
	if p, ok := target.(*spec.Package); ok {
		r.data.planned.add(p)
	} else {
		rc = r.data.planned.extend(rc)
	}
	refs := referencedPackages(target)
	ds := engine.ValidateResource(target, rc, r.data.tables.GPUModels, refs...)
	if e != nil {
		ds = append(ds, missingPackages(target, rc)...)
	}
	if !ds.HasErrors() {
		ds = append(ds, engine.CheckResource(ctx, e, target, rc, r.data.tables, skipped)...)
	}
	addDiagnostics(&resp.Diagnostics, ds)
	if ds.HasErrors() || e == nil {
		return
	}
	p, err := e.PlanResource(ctx, target, rc, r.data.tables.GPUModels, plan.Options{})
	if err != nil {
		resp.Diagnostics.AddWarning("Cannot plan against the cluster", err.Error())
		return
	}
	addDiagnostics(&resp.Diagnostics, p.Diagnostics)
	if req.State.Raw.IsNull() || !p.HasChanges() {
		return
	}
	// Terraform sees no change but the cluster differs: objects were changed
	// or deleted outside Terraform in ways no attribute shows. Plan an
	// update, which restores them.
	prior, err := toCty(req.State.Raw)
	if err != nil || !sameArguments(r.def, prior, planned) {
		return
	}
	unknown := map[string]cty.Value{"id": cty.UnknownVal(cty.String)}
	for _, name := range r.ops.unknownOnChange {
		unknown[name] = cty.UnknownVal(cty.String)
	}
	r.setPlanned(ctx, resp, unknown)
	resp.Diagnostics.AddWarning("Objects changed outside Terraform", "apply restores them:\n"+describeChanges(p))
}

// missingPackages warns about packages a quota or workload uses that the
// cluster does not have yet: fine when this apply creates them.
func missingPackages(target any, rc engine.ResourceContext) enginediag.Diagnostics {
	have := map[string]bool{}
	for _, n := range rc.PackageNames() {
		have[n] = true
	}
	var out enginediag.Diagnostics
	for _, name := range referencedPackages(target) {
		if have[name] {
			continue
		}
		attr := "package"
		if _, ok := target.(*spec.Quota); ok {
			attr = fmt.Sprintf("slices[%q]", name)
		}
		out = append(out, enginediag.Warningf("", attr, "Package not in the cluster yet",
			"no gpuslice_package named %q is applied; this is fine when this apply creates it, otherwise fix the name", name))
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

// sameArguments reports whether two resource values set the same arguments.
func sameArguments(def engineschema.Resource, a, b cty.Value) bool {
	for _, attr := range def.Attributes {
		if attr.Computed {
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

func (r *gpusliceResource) setPlanned(ctx context.Context, resp *resource.ModifyPlanResponse, values map[string]cty.Value) {
	for name, v := range values {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(name), frameworkValue(v))...)
	}
}

// frameworkValue converts the primitive cty values of computed attributes.
func frameworkValue(v cty.Value) any {
	switch {
	case v.Type() == cty.String && !v.IsKnown():
		return types.StringUnknown()
	case v.Type() == cty.String && v.IsNull():
		return types.StringNull()
	case v.Type() == cty.String:
		return types.StringValue(v.AsString())
	case v.Type() == cty.Number && !v.IsKnown():
		return types.NumberUnknown()
	case v.Type() == cty.Number && v.IsNull():
		return types.NumberNull()
	case v.Type() == cty.Number:
		return types.NumberValue(v.AsBigFloat())
	}
	panic(fmt.Sprintf("provider: computed attribute of type %s", v.Type().FriendlyName()))
}

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
	planned, err := toCty(raw)
	if err != nil {
		diags.AddError("Cannot read the plan", err.Error())
		return
	}
	target := r.decode(planned, diags)
	if target == nil {
		return
	}
	if r.ops.timeouts {
		d, ds := timeout(ctx, r.ops.wait(target))
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
	if _, ok := target.(*spec.Package); !ok {
		rc = r.data.planned.extend(rc)
	}
	p, err := e.PlanResource(ctx, target, rc, r.data.tables.GPUModels, plan.Options{})
	if err != nil {
		diags.AddError("Cannot plan against the cluster", err.Error())
		return
	}
	addDiagnostics(diags, p.Diagnostics)
	if p.Diagnostics.HasErrors() {
		return
	}
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		diags.AddError("Apply failed", err.Error())
		return
	}
	var waitErr error
	if w, ok := target.(*spec.Workload); ok && w.WaitFor != spec.WaitNone && len(engine.Changed(&spec.Stack{Workloads: []*spec.Workload{w}}, p)) > 0 {
		_, waitErr = e.Wait(ctx, []*spec.Workload{w}, nil)
	}
	r.writeState(ctx, e, planned, target, state, diags)
	r.setIdentity(ctx, identity, config.ResourceID(target), diags)
	if waitErr != nil {
		diags.AddError("Workload not ready", waitErr.Error()+"\n\nThe objects are applied; fix the cause (or set wait_for) and apply again.")
	}
}

// writeState records value's arguments with the computed attributes of the
// applied target.
func (r *gpusliceResource) writeState(ctx context.Context, e *engine.Engine, value cty.Value, target any, state *tfsdk.State, diags *diag.Diagnostics) {
	computed := map[string]cty.Value{"id": cty.StringVal(config.ResourceID(target))}
	if r.ops.plannedComputed != nil {
		for k, v := range r.ops.plannedComputed(target) {
			computed[k] = v
		}
	}
	if r.ops.computed != nil {
		more, err := r.ops.computed(ctx, e, target)
		if err != nil {
			diags.AddWarning("Cannot read the status", err.Error())
		}
		for k, v := range more {
			computed[k] = v
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
	out, err := fromCty(cty.ObjectVal(attrs), state.Raw.Type())
	if err != nil {
		diags.AddError("Cannot record the state", err.Error())
		return
	}
	state.Raw = out
}

func (r *gpusliceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.data == nil || r.data.engine == nil {
		return // keep the state as it is until there is a cluster to read
	}
	e := r.data.engine
	current, err := toCty(req.State.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the state", err.Error())
		return
	}
	idVal := current.GetAttr("id")
	if idVal.IsNull() || !idVal.IsKnown() {
		resp.Diagnostics.AddError("State without id", "the state of this "+r.def.Type+" has no id; remove it from the state (terraform state rm) and import it")
		return
	}
	id := idVal.AsString()
	var prior any
	if p, ds := config.DecodeResource(r.def, r.def.Type, current); !ds.HasErrors() && config.ResourceID(p) == id {
		prior = p
	}
	live, err := r.ops.read(ctx, e.Clients.Typed, id, prior)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read "+r.def.Type+" "+id, err.Error())
		return
	}
	if live == nil {
		resp.State.RemoveResource(ctx)
		return
	}
	liveArgs, err := specArguments(r.def, live)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read "+r.def.Type+" "+id, err.Error())
		return
	}
	value := current
	if prior == nil || !sameSpec(r.def, prior, liveArgs) {
		attrs := current.AsValueMap()
		for name, v := range liveArgs.AsValueMap() {
			attrs[name] = v
		}
		value = cty.ObjectVal(attrs)
	}
	engine.ResolveResource(live, r.data.tables.GPUModels)
	setAddress(live, engine.ResourceAddress(r.def.Type, id))
	r.writeState(ctx, e, value, live, &resp.State, &resp.Diagnostics)
	r.setIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
}

func sameSpec(def engineschema.Resource, prior any, liveArgs cty.Value) bool {
	priorArgs, err := specArguments(def, prior)
	return err == nil && priorArgs.RawEquals(liveArgs)
}

func (r *gpusliceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	e := r.engine(&resp.Diagnostics)
	if e == nil {
		return
	}
	current, err := toCty(req.State.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the state", err.Error())
		return
	}
	target := r.decode(current, &resp.Diagnostics)
	if target == nil {
		return
	}
	if r.ops.timeouts {
		var t timeouts.Value
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("timeouts"), &t)...)
		d, ds := t.Delete(ctx, 10*time.Minute)
		resp.Diagnostics.Append(ds...)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	p, err := e.PlanResourceDestroy(ctx, target)
	if err != nil {
		resp.Diagnostics.AddError("Cannot plan the destroy", err.Error())
		return
	}
	if err := e.Destroy(ctx, p, apply.Options{}); err != nil {
		resp.Diagnostics.AddError("Destroy failed", err.Error())
	}
}

func (r *gpusliceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id := req.ID
	if id == "" && req.Identity != nil {
		id = r.idFromIdentity(ctx, req.Identity, &resp.Diagnostics)
	}
	attrs, err := r.ops.importAttributes(id)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("%q: %v; the ID of a %s is %s", id, err, r.def.Type, r.def.ImportID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	r.setIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	for name, v := range attrs {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(name), v)...)
	}
}
