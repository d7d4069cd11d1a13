package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpuslice/gpuslice/engine/maintenance"
)

// gpuslice_gpus: every GPU the node plugins publish (engine/capacity), with
// its health, taints and slices (engine/maintenance).
type gpusDataSource struct{ data *clusterData }

func newGPUsDataSource() datasource.DataSource { return &gpusDataSource{} }

type gpuModel struct {
	Node              types.String `tfsdk:"node"`
	Model             types.String `tfsdk:"model"`
	UUID              types.String `tfsdk:"uuid"`
	Index             types.Int64  `tfsdk:"index"`
	ComputeCapability types.String `tfsdk:"compute_capability"`
	Architecture      types.String `tfsdk:"architecture"`
	DriverVersion     types.String `tfsdk:"driver_version"`
	MemoryBytes       types.Int64  `tfsdk:"memory_bytes"`
	MemorySource      types.String `tfsdk:"memory_source"`
	Health            types.String `tfsdk:"health"`
	HealthReason      types.String `tfsdk:"health_reason"`
	Drained           types.String `tfsdk:"drained"`
	Taints            []taintModel `tfsdk:"taints"`
	Slices            []string     `tfsdk:"slices"`
}

type taintModel struct {
	Key            types.String `tfsdk:"key"`
	Value          types.String `tfsdk:"value"`
	Effect         types.String `tfsdk:"effect"`
	FromNodePlugin types.Bool   `tfsdk:"from_node_plugin"`
	Rules          []string     `tfsdk:"rules"`
}

type gpusModel struct {
	ID    types.String `tfsdk:"id"`
	Node  types.String `tfsdk:"node"`
	Model types.String `tfsdk:"model"`
	GPUs  []gpuModel   `tfsdk:"gpus"`
}

func pathOf(name string) path.Path { return path.Root(name) }

func (d *gpusDataSource) Metadata(_ context.Context, _ datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = "gpuslice_gpus"
}

func (d *gpusDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "The GPUs the gpuslice node plugins publish in ResourceSlices, by node and index: what packages can be made of (`gpu_model` of a package must match `model`), " +
			"each with its health, the taints that keep slices off it and the slices still on it.",
		Attributes: map[string]schema.Attribute{
			"id":    schema.StringAttribute{Computed: true, MarkdownDescription: "Always `gpus`."},
			"node":  schema.StringAttribute{Optional: true, MarkdownDescription: "Only the GPUs of this node."},
			"model": schema.StringAttribute{Optional: true, MarkdownDescription: "Only GPUs of this model, e.g. `Tesla V100-PCIE-32GB`."},
			"gpus": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "The GPUs.", NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"node":               computed("Node name."),
				"model":              computed("Model as NVML reports it."),
				"uuid":               computed("GPU UUID."),
				"index":              schema.Int64Attribute{Computed: true, MarkdownDescription: "NVML index on the node."},
				"compute_capability": computed("CUDA compute capability, e.g. `7.0.0`."),
				"architecture":       computed("Architecture, e.g. `Volta`."),
				"driver_version":     computed("NVIDIA driver version."),
				"memory_bytes": schema.Int64Attribute{Computed: true, MarkdownDescription: "Memory in bytes that slices are cut from: " +
					"on a driver with NVML's v2 memory info, the total less what the driver reserves for itself; otherwise the whole total (see `memory_source`)."},
				"memory_source": computed("Where the node plugin read `memory_bytes`: `nvml_v2`, NVML's v2 memory info, the total less the driver's reservation, " +
					"so slices that add up to it can all be filled; `nvml_v1`, the v1 total from a driver without the v2 call, reservation included, " +
					"so the last slices of a GPU may not fill; `unknown` from a node plugin older than this attribute, which does not say (those before the v2 memory info read v1)."),
				"health": computed("`unhealthy` while its node plugin finds it failing (a critical XID, a double-bit ECC error, or the GPU not answering) and taints its devices " +
					"`gpuslice.dev/unhealthy`, so no new slice lands there; `healthy` otherwise; null for a GPU published after the taints were read."),
				"health_reason": computed("Why it is unhealthy, the taint's value: `xid-<n>`, `ecc-double-bit`, `gpu-lost` or `gpu-not-answering`; null while healthy."),
				"drained":       computed("`NoSchedule` or `NoExecute` while `gpuslice gpu drain` takes it out of service (its DeviceTaintRules), the stronger of them; null otherwise."),
				"taints": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "Every taint on any of its devices, once each: its node plugin's (in the ResourceSlices) and those of DeviceTaintRules (a drain's, or anyone's).",
					NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
						"key":              computed("Taint key, e.g. `gpuslice.dev/unhealthy` or `gpuslice.dev/drain`."),
						"value":            computed("Taint value."),
						"effect":           computed("`NoSchedule`, `NoExecute` or `None`."),
						"from_node_plugin": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether its node plugin publishes it in the ResourceSlices."},
						"rules":            schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "The DeviceTaintRules that set it."},
					}}},
				"slices": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "The ResourceClaims allocated a device of it, as `namespace/name`: the slices still on it."},
			}}},
		},
	}
}

func (d *gpusDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configureData(req.ProviderData, &resp.Diagnostics)
}

func (d *gpusDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m gpusModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d.data == nil || d.data.engine == nil {
		resp.Diagnostics.AddError("No cluster", "gpuslice_gpus reads the cluster; configure the provider's cluster connection (config_path, host, … or KUBE_CONFIG_PATH)")
		return
	}
	defer d.data.logRequests(ctx, "read gpuslice_gpus")
	gpus, err := d.data.engine.GPUs(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the cluster's GPUs", err.Error())
		return
	}
	states, err := d.data.engine.GPUStates(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the health, taints and claims of the cluster's GPUs",
			err.Error()+"; gpuslice_gpus lists ResourceSlices, DeviceTaintRules and the ResourceClaims of every namespace: the provider's credentials must allow it")
		return
	}
	byGPU := map[string]maintenance.GPUState{}
	for _, st := range states {
		byGPU[fmt.Sprintf("%s/%d", st.Node, st.Index)] = st
	}
	m.GPUs = []gpuModel{}
	for _, g := range gpus {
		if (!m.Node.IsNull() && g.Node != m.Node.ValueString()) || (!m.Model.IsNull() && g.Model != m.Model.ValueString()) {
			continue
		}
		gm := gpuModel{
			Node: types.StringValue(g.Node), Model: types.StringValue(g.Model), UUID: types.StringValue(g.UUID), Index: types.Int64Value(g.Index),
			ComputeCapability: types.StringValue(g.ComputeCapability), Architecture: types.StringValue(g.Architecture),
			DriverVersion: types.StringValue(g.DriverVersion), MemoryBytes: types.Int64Value(g.MemoryBytes), MemorySource: types.StringValue(g.MemorySource),
		}
		st, found := byGPU[fmt.Sprintf("%s/%d", g.Node, g.Index)]
		setState(&gm, st, found)
		m.GPUs = append(m.GPUs, gm)
	}
	m.ID = types.StringValue("gpus")
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// setState sets what gpuslice_gpus says of a GPU's health, drain, taints
// and slices; found is false for a GPU the state was not read of.
func setState(gm *gpuModel, st maintenance.GPUState, found bool) {
	orNull := func(s string) types.String {
		if s == "" {
			return types.StringNull()
		}
		return types.StringValue(s)
	}
	gm.Taints, gm.Slices = []taintModel{}, []string{}
	gm.Health, gm.HealthReason, gm.Drained = types.StringNull(), types.StringNull(), types.StringNull()
	if !found {
		return
	}
	gm.Health = types.StringValue("healthy")
	if st.Unhealthy() {
		gm.Health = types.StringValue("unhealthy")
	}
	gm.HealthReason, gm.Drained = orNull(st.HealthReason), orNull(string(st.Drained))
	for _, t := range st.Taints {
		gm.Taints = append(gm.Taints, taintModel{Key: types.StringValue(t.Key), Value: types.StringValue(t.Value), Effect: types.StringValue(string(t.Effect)),
			FromNodePlugin: types.BoolValue(t.FromSlice), Rules: append([]string{}, t.Rules...)})
	}
	gm.Slices = append(gm.Slices, st.Claims...)
}
