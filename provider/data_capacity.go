package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// gpuslice_capacity: per package, the slices published, allocated and free,
// in all and per node (engine/capacity).
type capacityDataSource struct{ data *clusterData }

func newCapacityDataSource() datasource.DataSource { return &capacityDataSource{} }

type countsModel struct {
	Node      types.String `tfsdk:"node"`
	Published types.Int64  `tfsdk:"published"`
	Allocated types.Int64  `tfsdk:"allocated"`
	Free      types.Int64  `tfsdk:"free"`
}

type packageCapacityModel struct {
	Name       types.String  `tfsdk:"name"`
	GPUModel   types.String  `tfsdk:"gpu_model"`
	Fraction   types.Int64   `tfsdk:"fraction"`
	Sharing    types.String  `tfsdk:"sharing"`
	Isolation  types.String  `tfsdk:"isolation"`
	MIGProfile types.String  `tfsdk:"mig_profile"`
	Published  types.Int64   `tfsdk:"published"`
	Allocated  types.Int64   `tfsdk:"allocated"`
	Free       types.Int64   `tfsdk:"free"`
	Nodes      []countsModel `tfsdk:"nodes"`
}

type capacityModel struct {
	ID       types.String           `tfsdk:"id"`
	Package  types.String           `tfsdk:"package"`
	Packages []packageCapacityModel `tfsdk:"packages"`
}

func (d *capacityDataSource) Metadata(_ context.Context, _ datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = "gpuslice_capacity"
}

func countAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"published": schema.Int64Attribute{Computed: true, MarkdownDescription: "Slices the node plugins publish."},
		"allocated": schema.Int64Attribute{Computed: true, MarkdownDescription: "Slices allocated to claims."},
		"free":      schema.Int64Attribute{Computed: true, MarkdownDescription: "Slices the scheduler could still allocate: slices of one GPU share its memory and compute, so fewer than the unallocated ones may be free."},
	}
}

func (d *capacityDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	nodeAttrs := countAttributes()
	nodeAttrs["node"] = schema.StringAttribute{Computed: true, MarkdownDescription: "Node name."}
	pkgAttrs := countAttributes()
	pkgAttrs["name"] = schema.StringAttribute{Computed: true, MarkdownDescription: "Package (DeviceClass) name."}
	pkgAttrs["gpu_model"] = schema.StringAttribute{Computed: true, MarkdownDescription: "GPU model of the package."}
	pkgAttrs["fraction"] = schema.Int64Attribute{Computed: true, MarkdownDescription: "Percent of a GPU one slice of a fraction package gets; 0 for the other kinds."}
	pkgAttrs["sharing"] = schema.StringAttribute{Computed: true, MarkdownDescription: "The package's kind: `partition` (a fraction), `any-size`, `time-sliced` or `mig`. For any-size and time-sliced, `published` is how many slices the GPUs could hold were they empty; for `mig`, how many MIG instances of the profile the nodes have."}
	pkgAttrs["isolation"] = schema.StringAttribute{Computed: true, MarkdownDescription: "What holds a slice to its share: `software` (the shim: fraction and any-size), `hardware` (the GPU's own partition: MIG) or `none` (time-sliced)."}
	pkgAttrs["mig_profile"] = schema.StringAttribute{Computed: true, MarkdownDescription: "A MIG package's profile, e.g. `1g.5gb`; empty for the other kinds."}
	pkgAttrs["nodes"] = schema.ListNestedAttribute{Computed: true, MarkdownDescription: "The same counts per node, by node name.",
		NestedObject: schema.NestedAttributeObject{Attributes: nodeAttrs}}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Slices of every gpuslice package in the cluster: published by the node plugins, allocated to claims, and free. Quota is an entitlement, not a reservation: check `free` before counting on a slice.",
		Attributes: map[string]schema.Attribute{
			"id":      schema.StringAttribute{Computed: true, MarkdownDescription: "Always `capacity`."},
			"package": schema.StringAttribute{Optional: true, MarkdownDescription: "Only this package; all packages when unset."},
			"packages": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "Per package, by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: pkgAttrs}},
		},
	}
}

func (d *capacityDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = configureData(req.ProviderData, &resp.Diagnostics)
}

func configureData(pd any, diags *diag.Diagnostics) *clusterData {
	if pd == nil {
		return nil
	}
	data, ok := pd.(*clusterData)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("got %T; this is a bug in the gpuslice provider", pd))
	}
	return data
}

func (d *capacityDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m capacityModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d.data == nil || d.data.engine == nil {
		resp.Diagnostics.AddError("No cluster", "gpuslice_capacity reads the cluster; configure the provider's cluster connection (config_path, host, … or KUBE_CONFIG_PATH)")
		return
	}
	defer d.data.logRequests(ctx, "read gpuslice_capacity")
	pkgs, err := d.data.engine.Capacity(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the slices of the packages", err.Error())
		return
	}
	found := false
	m.Packages = []packageCapacityModel{}
	for _, p := range pkgs {
		if !m.Package.IsNull() && p.Name != m.Package.ValueString() {
			continue
		}
		found = true
		pm := packageCapacityModel{Name: types.StringValue(p.Name), GPUModel: types.StringValue(p.GPUModel), Fraction: types.Int64Value(int64(p.Fraction)), Sharing: types.StringValue(p.Sharing),
			Isolation: types.StringValue(p.Isolation), MIGProfile: types.StringValue(p.MIGProfile),
			Published: types.Int64Value(p.Published), Allocated: types.Int64Value(p.Allocated), Free: types.Int64Value(p.Free), Nodes: []countsModel{}}
		for _, n := range p.Nodes {
			pm.Nodes = append(pm.Nodes, countsModel{Node: types.StringValue(n.Node), Published: types.Int64Value(n.Published), Allocated: types.Int64Value(n.Allocated), Free: types.Int64Value(n.Free)})
		}
		m.Packages = append(m.Packages, pm)
	}
	if !m.Package.IsNull() && !found {
		resp.Diagnostics.AddAttributeError(pathOf("package"), "Unknown package", fmt.Sprintf("no gpuslice package named %q is applied in the cluster", m.Package.ValueString()))
		return
	}
	m.ID = types.StringValue("capacity")
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
