package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/zclconf/go-cty/cty"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/config"
	engineschema "github.com/gpuslice/gpuslice/engine/schema"
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
		diags.AddError("No cluster", reason+": set config_path, host (with token or certificates) or exec in the provider block, or KUBE_CONFIG_PATH")
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
