package provider

// Read: what the cluster says now, so drift shows as the attribute that
// changed, and import fills every attribute.

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/config"
	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

func (r *gpusliceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.data == nil || r.data.engine == nil {
		return // keep the state as it is until there is a cluster to read
	}
	defer r.data.logRequests(ctx, "read "+r.def.Type)
	e := r.data.engine
	current, err := tfvalue.ToCty(req.State.Raw)
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
	var prior spec.Resource
	if p, ds := config.DecodeResource(r.def, r.def.Type, current); !ds.HasErrors() && p.ID() == id {
		prior = p
	}
	live, err := e.ReadResource(ctx, r.def.Type, id, prior)
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
	live.SetAddr(engine.ResourceAddress(r.def.Type, id))
	r.writeState(ctx, e, value, live, &resp.State, &resp.Diagnostics)
	r.setIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
}

func sameSpec(def engineschema.Resource, prior spec.Resource, liveArgs cty.Value) bool {
	priorArgs, err := specArguments(def, prior)
	return err == nil && priorArgs.RawEquals(liveArgs)
}
