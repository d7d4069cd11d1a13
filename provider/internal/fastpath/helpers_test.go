package fastpath_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	providerschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	"github.com/gpuslice/gpuslice/provider"
	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

// gpusliceTypes are the provider's resource types.
func gpusliceTypes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range provider.New("test")().Resources(context.Background()) {
		var md resource.MetadataResponse
		r().Metadata(context.Background(), resource.MetadataRequest{ProviderTypeName: "gpuslice"}, &md)
		out = append(out, md.TypeName)
	}
	sort.Strings(out)
	if len(out) != 4 {
		t.Fatalf("resource types %v, want the four", out)
	}
	return out
}

// scriptedProvider serves the gpuslice resources' schemas, with Read and
// ModifyPlan done as the provider does them but answered by a script
// instead of a cluster: the fast path and the framework both reach it
// through fastpath.Once, as they reach the provider's own work.
type scriptedProvider struct {
	real   fwprovider.Provider
	script *script
}

func (p *scriptedProvider) Metadata(ctx context.Context, req fwprovider.MetadataRequest, resp *fwprovider.MetadataResponse) {
	p.real.Metadata(ctx, req, resp)
}

func (p *scriptedProvider) Schema(_ context.Context, _ fwprovider.SchemaRequest, resp *fwprovider.SchemaResponse) {
	resp.Schema = providerschema.Schema{}
}

func (p *scriptedProvider) Configure(context.Context, fwprovider.ConfigureRequest, *fwprovider.ConfigureResponse) {
}

func (p *scriptedProvider) Resources(ctx context.Context) []func() resource.Resource {
	var out []func() resource.Resource
	for _, r := range p.real.Resources(ctx) {
		out = append(out, func() resource.Resource { return &scriptedResource{real: r(), script: p.script} })
	}
	return out
}

func (p *scriptedProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }

// script answers reads and plans, counting how often it was asked.
type script struct {
	mu    sync.Mutex
	read  func(state cty.Value) fastpath.ReadResult
	plan  func(planned cty.Value) fastpath.PlanResult
	calls int
}

func (s *script) ReadValue(ctx context.Context, state cty.Value) (fastpath.ReadResult, bool) {
	return fastpath.Once(ctx, state, func() fastpath.ReadResult {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls++
		return s.read(state)
	}), true
}

func (s *script) PlanValue(ctx context.Context, planned, _ cty.Value) fastpath.PlanResult {
	return fastpath.Once(ctx, planned, func() fastpath.PlanResult {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls++
		if s.plan == nil {
			return fastpath.PlanResult{}
		}
		return s.plan(planned)
	})
}

func (s *script) asked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

type scriptedResource struct {
	real   resource.Resource
	script *script
}

var (
	_ resource.ResourceWithIdentity   = (*scriptedResource)(nil)
	_ resource.ResourceWithModifyPlan = (*scriptedResource)(nil)
)

func (r *scriptedResource) Metadata(ctx context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	r.real.Metadata(ctx, req, resp)
}

func (r *scriptedResource) Schema(ctx context.Context, req resource.SchemaRequest, resp *resource.SchemaResponse) {
	r.real.Schema(ctx, req, resp)
}

func (r *scriptedResource) IdentitySchema(ctx context.Context, req resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	r.real.(resource.ResourceWithIdentity).IdentitySchema(ctx, req, resp)
}

func (r *scriptedResource) Create(_ context.Context, _ resource.CreateRequest, resp *resource.CreateResponse) {
	resp.Diagnostics.AddError("not scripted", "create")
}

func (r *scriptedResource) Update(_ context.Context, _ resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.AddError("not scripted", "update")
}

func (r *scriptedResource) Delete(_ context.Context, _ resource.DeleteRequest, resp *resource.DeleteResponse) {
	resp.Diagnostics.AddError("not scripted", "delete")
}

func (r *scriptedResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	current, err := tfvalue.ToCty(req.State.Raw)
	if err != nil {
		resp.Diagnostics.AddError("state", err.Error())
		return
	}
	res, _ := r.script.ReadValue(ctx, current)
	res.Respond(ctx, resp)
}

func (r *scriptedResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	planned, err := tfvalue.ToCty(req.Plan.Raw)
	if err != nil {
		resp.Diagnostics.AddError("plan", err.Error())
		return
	}
	res := r.script.PlanValue(ctx, planned, cty.NilVal)
	resp.Diagnostics.Append(res.Diagnostics...)
	for name, v := range res.Set {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(name), tfvalue.Primitive(v))...)
	}
}

// scripted serves the scripted provider with the fast path in mode, in
// front of framework (the framework's own server of it when nil).
func scripted(t *testing.T, mode fastpath.Mode, wrap func(tfprotov6.ProviderServer) tfprotov6.ProviderServer) (*fastpath.Server, *script, *fastpath.Counts) {
	t.Helper()
	sc := &script{}
	p := &scriptedProvider{real: provider.New("test")(), script: sc}
	framework, err := providerserver.NewProtocol6WithError(p)()
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		framework = wrap(framework)
	}
	counts := &fastpath.Counts{}
	s := fastpath.New(framework, p, func(string) (fastpath.Resource, bool) { return sc, true }, mode, counts)
	if only := s.FrameworkOnly(); len(only) > 0 {
		t.Fatalf("left to the framework: %v", only)
	}
	return s, sc, counts
}

// blankState is a state of type ty as Terraform keeps one: single blocks
// there, list blocks empty, everything else null, but the id and identity
// attributes.
func blankState(ty, identity cty.Type) cty.Value {
	attrs := blankObject(ty).AsValueMap()
	var id []string
	for _, name := range sortedAttributes(identity) {
		attrs[name] = cty.StringVal("x-" + name)
		id = append(id, "x-"+name)
	}
	attrs["id"] = cty.StringVal(strings.Join(id, "/"))
	return cty.ObjectVal(attrs)
}

func blankObject(ty cty.Type) cty.Value {
	attrs := map[string]cty.Value{}
	for name, at := range ty.AttributeTypes() {
		switch {
		case at.IsObjectType():
			attrs[name] = blankObject(at)
		case at.IsListType() && at.ElementType().IsObjectType():
			attrs[name] = cty.ListValEmpty(at.ElementType())
		default:
			attrs[name] = cty.NullVal(at)
		}
	}
	return cty.ObjectVal(attrs)
}

// identityOf is the identity of a blank state.
func identityOf(state cty.Value, identity cty.Type) cty.Value {
	attrs := map[string]cty.Value{}
	for _, name := range sortedAttributes(identity) {
		attrs[name] = state.GetAttr(name)
	}
	return cty.ObjectVal(attrs)
}

func sortedAttributes(ty cty.Type) []string {
	var out []string
	for name := range ty.AttributeTypes() {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func dynamic(t *testing.T, v cty.Value) *tfprotov6.DynamicValue {
	t.Helper()
	b, err := ctymsgpack.Marshal(v, v.Type())
	if err != nil {
		t.Fatal(err)
	}
	return &tfprotov6.DynamicValue{MsgPack: b}
}

func undynamic(t *testing.T, dv *tfprotov6.DynamicValue, ty cty.Type) cty.Value {
	t.Helper()
	if dv == nil {
		t.Fatal("no value")
	}
	v, err := ctymsgpack.Unmarshal(dv.MsgPack, ty)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func describe(ds []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range ds {
		at := ""
		if d.Attribute != nil {
			at = " at " + d.Attribute.String()
		}
		out = append(out, d.Severity.String()+" "+d.Summary+": "+d.Detail+at)
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// errorSummaries are the summaries of the errors among ds, joined by "; ".
func errorSummaries(ds []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range ds {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			out = append(out, d.Summary)
		}
	}
	return strings.Join(out, "; ")
}

func differs(ds []*tfprotov6.Diagnostic) string {
	for _, d := range ds {
		if strings.Contains(d.Summary, "fast path differs") {
			return d.Detail
		}
	}
	return ""
}
