// Package provider is the Terraform provider gpuslice
// (registry.terraform.io/gpuslice/gpuslice). It is thin: its schemas come
// from engine/schema (converted by internal/tfschema), its values cross
// into cty (internal/tfvalue) and become specs through the engine's
// decoder (engine/config), and plan, apply, drift, import, status and
// capacity are the engine's. It holds no Kubernetes logic of its own and
// reaches the cluster only through the engine; internal/connection turns
// the provider block into a client configuration for it.
package provider

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/gpuslice/gpuslice/engine"
	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/provider/internal/connection"
	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// logRequests writes the API requests this run has sent so far, and the
// process's peak memory, to the debug log (TF_LOG=DEBUG): a plan's reads
// do not grow with its resources, nor with other tenants' objects.
func (d *clusterData) logRequests(ctx context.Context, after string) {
	if d == nil || d.engine == nil {
		return
	}
	c := d.engine.Clients.Requests.Counts()
	tflog.Debug(ctx, "gpuslice API requests", map[string]any{
		"run": d.run, "after": after, "informers": d.engine.Informers(),
		"list": c.List, "watch": c.Watch, "get": c.Get, "create": c.Create, "update": c.Update, "patch": c.Patch, "delete": c.Delete,
		"peak_rss_bytes": peakRSS(),
	})
}

// Address is the provider's source address.
const Address = "registry.terraform.io/gpuslice/gpuslice"

// New returns a constructor of the provider at version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &gpusliceProvider{version: version} }
}

type gpusliceProvider struct {
	version string

	mu   sync.Mutex
	runs int
	// last is the engine of the last Configure. Terraform starts a provider
	// process per run and configuration, so there is one; an in-process
	// test server configures the same provider for every command, and each
	// Configure ends the previous run's watches.
	last *engine.Engine
	// prefetched is what last's Prefetch started reading.
	prefetched []engine.Read
	// data is what the last Configure gave the resources: the fast path
	// (server.go) serves them with it.
	data *clusterData
	// fast counts the requests the fast path served.
	fast fastpath.Counts
}

// currentData is the last Configure's cluster data; nil before one.
func (p *gpusliceProvider) currentData() *clusterData {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.data
}

// clusterData is what resources and data sources get from Configure: one
// engine, whose view of the cluster every resource of the run shares.
type clusterData struct {
	// engine is nil when the cluster cannot be reached yet: skipped says why
	// (e.g. its address is known only after apply).
	engine  *engine.Engine
	skipped string
	tables  *tables.Set
	planned plannedPackages
	// run names this provider run in the debug log.
	run string
}

func (p *gpusliceProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "gpuslice"
	resp.Version = p.version
}

func (p *gpusliceProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Share NVIDIA GPUs on Kubernetes: GPU packages (fixed fractions of a GPU model), per-namespace quotas of them and workloads that run on a slice, rendered as Dynamic Resource Allocation objects.\n\n" +
			"The cluster connection is configured like the `hashicorp/kubernetes` provider's, with the same `KUBE_*` environment variables; explicit arguments win over the environment. No kubeconfig is read unless `config_path`, `config_paths` or `KUBE_CONFIG_PATH(S)` names one.",
		Attributes: connection.Attributes(),
		Blocks:     connection.Blocks(),
	}
}

func (p *gpusliceProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg connection.Model
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	files, unknownFiles := tfvalue.Strings(cfg.TableFiles)
	if unknownFiles {
		resp.Diagnostics.AddAttributeError(path.Root("table_files"), "Unknown table files", "table_files must be known when planning; use literal paths")
		return
	}
	set, err := tables.Load(files...)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("table_files"), "Invalid table file", err.Error())
		return
	}
	p.mu.Lock()
	p.runs++
	data := &clusterData{tables: set, run: fmt.Sprintf("%d-%d", os.Getpid(), p.runs)}
	if p.last != nil {
		p.last.Close()
		p.last = nil
	}
	p.data = nil
	p.mu.Unlock()
	var inventoryNamespace string
	if !cfg.InventoryNamespace.IsNull() && !cfg.InventoryNamespace.IsUnknown() {
		inventoryNamespace = cfg.InventoryNamespace.ValueString()
	}
	switch rest, skipped, err := cfg.RestConfig(); {
	case err != nil:
		resp.Diagnostics.AddError("Invalid cluster connection", err.Error())
		return
	case skipped != "":
		data.skipped = skipped
	default:
		e, err := engine.New(rest, inventoryNamespace)
		if err != nil {
			resp.Diagnostics.AddError("Cannot connect to the cluster", err.Error()+"; check host, certificates and token")
			return
		}
		e.Tables = set
		// What every resource needs from the whole cluster is listed at
		// once; what it needs of its namespace starts with the first
		// resource naming that namespace (Terraform does not say which
		// namespaces a configuration names before it plans them). A
		// workload is planned after the package and quota it refers to, so
		// its namespace is listed meanwhile.
		e.Prefetch()
		data.engine = e
		p.mu.Lock()
		p.last, p.prefetched = e, e.Reads()
		p.mu.Unlock()
	}
	resp.ResourceData = data
	resp.DataSourceData = data
	p.mu.Lock()
	p.data = data
	p.mu.Unlock()
}

func (p *gpusliceProvider) Resources(context.Context) []func() resource.Resource {
	var out []func() resource.Resource
	for _, r := range engineschema.Resources() {
		out = append(out, func() resource.Resource { return newResource(r) })
	}
	return out
}

func (p *gpusliceProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newCapacityDataSource, newGPUsDataSource}
}
