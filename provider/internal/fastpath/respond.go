package fastpath

import (
	"context"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

// Respond writes what Read found into the framework's response, as the
// fast path writes it into the protocol's. The identity is set when the
// resource is gone too: the framework fails every read that leaves it null,
// a removal included, and a state written before identities existed, or by
// a client that keeps none, has none to leave in place. Without it every
// plan after an out-of-band delete fails until `state rm`.
func (res ReadResult) Respond(ctx context.Context, resp *resource.ReadResponse) {
	resp.Diagnostics.Append(res.Diagnostics...)
	if resp.Diagnostics.HasError() {
		return
	}
	if res.State == cty.NilVal {
		resp.State.RemoveResource(ctx)
	} else {
		out, err := tfvalue.FromCty(res.State, resp.State.Raw.Type())
		if err != nil {
			resp.Diagnostics.AddError("Cannot record the state", err.Error())
			return
		}
		resp.State.Raw = out
	}
	if resp.Identity == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(res.Identity)) {
		resp.Diagnostics.Append(resp.Identity.SetAttribute(ctx, path.Root(name), res.Identity[name])...)
	}
}
