package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/config"
	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/provider/internal/tfschema"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

// gpusliceResource is every gpuslice resource type: what differs between
// them is their engine schema (def) and their spec type, which the engine
// decodes, plans, reads and diagnoses through spec.Resource.
type gpusliceResource struct {
	def  engineschema.Resource
	data *clusterData
}

var (
	_ resource.ResourceWithModifyPlan  = (*gpusliceResource)(nil)
	_ resource.ResourceWithImportState = (*gpusliceResource)(nil)
	_ resource.ResourceWithConfigure   = (*gpusliceResource)(nil)
)

func newResource(def engineschema.Resource) resource.Resource {
	return &gpusliceResource{def: def}
}

func (r *gpusliceResource) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = r.def.Type
}

func (r *gpusliceResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = tfschema.Resource(r.def)
	if r.def.Waits {
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
		diags.AddError("No cluster", reason+": set config_path, host (with token or certificates) or exec in the provider block, or KUBE_CONFIG_PATH")
		return nil
	}
	return r.data.engine
}

// decode converts a plan or state value to the resource's spec, resolved
// and with its engine address set.
func (r *gpusliceResource) decode(v cty.Value, diags *diag.Diagnostics) spec.Resource {
	target, ds := config.DecodeResource(r.def, r.def.Type, v)
	tfvalue.AddDiagnostics(diags, ds)
	if ds.HasErrors() {
		return nil
	}
	engine.ResolveResource(target, r.data.tables.GPUModels)
	target.SetAddr(engine.ResourceAddress(r.def.Type, target.ID()))
	return target
}

// importAttributes splits an import ID into the identity attributes it
// joins with "/"; false when the ID has not one non-empty part for each.
func (r *gpusliceResource) importAttributes(id string) (map[string]string, bool) {
	parts := strings.Split(id, "/")
	if len(parts) != len(r.def.Identity) {
		return nil, false
	}
	out := map[string]string{}
	for i, name := range r.def.Identity {
		if parts[i] == "" {
			return nil, false
		}
		out[name] = parts[i]
	}
	return out, true
}

// defaultApplyTimeout is how long create and update may take unless the
// timeouts block says otherwise: the workload's own wait, plus a minute
// to apply its objects.
func defaultApplyTimeout(target spec.Resource) time.Duration {
	d := 10 * time.Minute
	for _, w := range spec.StackOf(target).Workloads {
		if t, err := time.ParseDuration(w.Timeout); err == nil {
			d = t
		}
	}
	return d + time.Minute
}

// unknownOnChange lists the computed attributes apply may change: every
// one the spec cannot tell before apply (a workload's status), and the id.
func (r *gpusliceResource) unknownOnChange(target spec.Resource) map[string]cty.Value {
	planned := target.PlannedAttributes()
	out := map[string]cty.Value{"id": cty.UnknownVal(cty.String)}
	for _, a := range r.def.Attributes {
		if _, known := planned[a.Name]; a.Computed && !known {
			out[a.Name] = cty.UnknownVal(a.Type)
		}
	}
	return out
}
