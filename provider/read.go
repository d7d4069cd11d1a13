package provider

// Read: what the cluster says now, so drift shows as the attribute that
// changed, and import fills every attribute.

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/config"
	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

func (r *gpusliceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	current, err := tfvalue.ToCty(req.State.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the state", err.Error())
		return
	}
	res, ok := r.ReadValue(ctx, current)
	if !ok {
		// Keep the state as it is until there is a cluster to read, with
		// the identity its id names: a state without one (see Respond)
		// would fail the read.
		if id := current.GetAttr("id"); id.IsKnown() && !id.IsNull() {
			setIdentityAttributes(ctx, resp.Identity, r.identityAttributes(id.AsString()), &resp.Diagnostics)
		}
		return
	}
	res.Respond(ctx, resp)
}

// ReadValue is Read on the state's value, for Read and the fast path
// alike: done once per request (fastpath.Once), so that when both serve
// it, both answer from one reading of the cluster. False when there is no
// cluster to read.
func (r *gpusliceResource) ReadValue(ctx context.Context, current cty.Value) (fastpath.ReadResult, bool) {
	if r.data == nil || r.data.engine == nil {
		return fastpath.ReadResult{}, false
	}
	return fastpath.Once(ctx, current, func() fastpath.ReadResult {
		var diags diag.Diagnostics
		next, id := r.readValue(ctx, current, &diags)
		return fastpath.ReadResult{State: next, Identity: r.identityAttributes(id), Diagnostics: diags}
	}), true
}

// readValue is Read on the state's value (the engine must be there): the
// state the cluster gives the resource now and its import ID, or cty.NilVal
// when its objects are gone.
func (r *gpusliceResource) readValue(ctx context.Context, current cty.Value, diags *diag.Diagnostics) (cty.Value, string) {
	defer r.data.logRequests(ctx, "read "+r.def.Type)
	e := r.data.engine
	idVal := current.GetAttr("id")
	if idVal.IsNull() || !idVal.IsKnown() {
		diags.AddError("State without id", "the state of this "+r.def.Type+" has no id; remove it from the state (terraform state rm) and import it")
		return cty.NilVal, ""
	}
	id := idVal.AsString()
	var prior spec.Resource
	if p, ds := config.DecodeResource(r.def, r.def.Type, current); !ds.HasErrors() && p.ID() == id {
		prior = p
	}
	live, err := e.ReadResource(ctx, r.def.Type, id, prior)
	if err != nil {
		diags.AddError("Cannot read "+r.def.Type+" "+id, err.Error())
		return cty.NilVal, ""
	}
	if live == nil {
		return cty.NilVal, id
	}
	value := current
	if prior == nil || !sameJSON(prior, live) {
		liveArgs, err := specArguments(r.def, live)
		if err != nil {
			diags.AddError("Cannot read "+r.def.Type+" "+id, err.Error())
			return cty.NilVal, ""
		}
		if prior == nil || !sameSpec(r.def, prior, liveArgs) {
			attrs := current.AsValueMap()
			for name, v := range liveArgs.AsValueMap() {
				attrs[name] = v
			}
			value = cty.ObjectVal(attrs)
		}
	}
	engine.ResolveResource(live, r.data.tables.GPUModels)
	live.SetAddr(engine.ResourceAddress(r.def.Type, id))
	return r.stateValue(ctx, e, value, live, recordedRanOn(current), diags), id
}

// sameJSON reports whether two specs encode alike: then their arguments
// are the same, without converting either (the common case of a read).
func sameJSON(a, b spec.Resource) bool {
	ja, err := json.Marshal(a)
	if err != nil {
		return false
	}
	jb, err := json.Marshal(b)
	return err == nil && bytes.Equal(ja, jb)
}

func sameSpec(def engineschema.Resource, prior spec.Resource, liveArgs cty.Value) bool {
	priorArgs, err := specArguments(def, prior)
	return err == nil && priorArgs.RawEquals(liveArgs)
}

// recordedRanOn is where the state says a workload's first replica ran,
// for a Job that has finished since (status.Keeping); zero for the other
// resource types.
func recordedRanOn(state cty.Value) status.RanOn {
	get := func(name string) string {
		if !state.Type().HasAttribute(name) {
			return ""
		}
		v := state.GetAttr(name)
		if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			return ""
		}
		return v.AsString()
	}
	return status.RanOn{Claim: get("claim"), Node: get("node"), Device: get("device")}
}
