package provider

// Delete and import.

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

func (r *gpusliceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	e := r.engine(&resp.Diagnostics)
	if e == nil {
		return
	}
	defer r.data.logRequests(ctx, "delete "+r.def.Type)
	current, err := tfvalue.ToCty(req.State.Raw)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the state", err.Error())
		return
	}
	target := r.decode(current, &resp.Diagnostics)
	if target == nil {
		return
	}
	if r.def.Waits {
		var t timeouts.Value
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("timeouts"), &t)...)
		d, ds := t.Delete(ctx, 10*time.Minute)
		resp.Diagnostics.Append(ds...)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	unlock, err := lockResource(ctx, e, target, "destroy")
	if err != nil {
		resp.Diagnostics.AddError("Error acquiring the state lock", err.Error())
		return
	}
	defer unlock()
	p, err := e.PlanResourceDestroy(ctx, target)
	if err != nil {
		resp.Diagnostics.AddError("Cannot plan the destroy", err.Error())
		return
	}
	wctx, cancel := writeContext(ctx)
	defer cancel()
	if err := e.Destroy(wctx, p, apply.Options{Stop: ctx, Writer: plan.Writer{Who: "terraform (" + target.Addr() + ")"}}); err != nil {
		resp.Diagnostics.AddError("Destroy failed", err.Error())
	}
}

func (r *gpusliceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id := req.ID
	if id == "" && req.Identity != nil {
		id = r.idFromIdentity(ctx, req.Identity, &resp.Diagnostics)
	}
	attrs, ok := r.importAttributes(id)
	if !ok {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("%q: the ID of a %s is %s, no part empty", id, r.def.Type, r.def.ImportID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	r.setIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	for name, v := range attrs {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(name), v)...)
	}
}
