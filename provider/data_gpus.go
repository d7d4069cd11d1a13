package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// gpuslice_gpus: every GPU the node plugins publish (engine/capacity).
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
		MarkdownDescription: "The GPUs the gpuslice node plugins publish in ResourceSlices, by node and index: what packages can be made of (`gpu_model` of a package must match `model`).",
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
	m.GPUs = []gpuModel{}
	for _, g := range gpus {
		if (!m.Node.IsNull() && g.Node != m.Node.ValueString()) || (!m.Model.IsNull() && g.Model != m.Model.ValueString()) {
			continue
		}
		m.GPUs = append(m.GPUs, gpuModel{
			Node: types.StringValue(g.Node), Model: types.StringValue(g.Model), UUID: types.StringValue(g.UUID), Index: types.Int64Value(g.Index),
			ComputeCapability: types.StringValue(g.ComputeCapability), Architecture: types.StringValue(g.Architecture),
			DriverVersion: types.StringValue(g.DriverVersion), MemoryBytes: types.Int64Value(g.MemoryBytes), MemorySource: types.StringValue(g.MemorySource),
		})
	}
	m.ID = types.StringValue("gpus")
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
