package fastpath_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/provider"
	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
)

// unknownCheck is a validator, plan modifier and default of every kind
// that the fast path has never heard of. As a validator it refuses every
// known value.
type unknownCheck struct{}

const refusal = "refused by the test's validator"

func (unknownCheck) Description(context.Context) string { return "a check the fast path does not know" }
func (unknownCheck) MarkdownDescription(context.Context) string {
	return "a check the fast path does not know"
}

func refuse(known bool, diags interface{ AddError(string, string) }) {
	if known {
		diags.AddError(refusal, "no")
	}
}

func (unknownCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	refuse(!req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown(), &resp.Diagnostics)
}
func (unknownCheck) ValidateNumber(_ context.Context, req validator.NumberRequest, resp *validator.NumberResponse) {
	refuse(!req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown(), &resp.Diagnostics)
}
func (unknownCheck) ValidateBool(_ context.Context, req validator.BoolRequest, resp *validator.BoolResponse) {
	refuse(!req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown(), &resp.Diagnostics)
}
func (unknownCheck) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	refuse(!req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown(), &resp.Diagnostics)
}
func (unknownCheck) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	refuse(!req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown(), &resp.Diagnostics)
}
func (unknownCheck) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	refuse(!req.ConfigValue.IsNull() && !req.ConfigValue.IsUnknown(), &resp.Diagnostics)
}
func (unknownCheck) PlanModifyString(context.Context, planmodifier.StringRequest, *planmodifier.StringResponse) {
}
func (unknownCheck) PlanModifyNumber(context.Context, planmodifier.NumberRequest, *planmodifier.NumberResponse) {
}
func (unknownCheck) PlanModifyBool(context.Context, planmodifier.BoolRequest, *planmodifier.BoolResponse) {
}
func (unknownCheck) PlanModifyList(context.Context, planmodifier.ListRequest, *planmodifier.ListResponse) {
}
func (unknownCheck) PlanModifyMap(context.Context, planmodifier.MapRequest, *planmodifier.MapResponse) {
}
func (unknownCheck) PlanModifyObject(context.Context, planmodifier.ObjectRequest, *planmodifier.ObjectResponse) {
}
func (unknownCheck) DefaultString(_ context.Context, _ defaults.StringRequest, resp *defaults.StringResponse) {
	resp.PlanValue = types.StringValue("x")
}
func (unknownCheck) DefaultNumber(context.Context, defaults.NumberRequest, *defaults.NumberResponse) {
}
func (unknownCheck) DefaultBool(context.Context, defaults.BoolRequest, *defaults.BoolResponse) {}
func (unknownCheck) DefaultList(context.Context, defaults.ListRequest, *defaults.ListResponse) {}
func (unknownCheck) DefaultMap(context.Context, defaults.MapRequest, *defaults.MapResponse)    {}

// mutatedProvider is the gpuslice provider with one resource's schema
// edited.
type mutatedProvider struct {
	fwprovider.Provider
	typeName string
	edit     func(schema.Schema) schema.Schema
}

func (m mutatedProvider) Resources(ctx context.Context) []func() resource.Resource {
	var out []func() resource.Resource
	for _, r := range m.Provider.Resources(ctx) {
		out = append(out, func() resource.Resource {
			inner := r()
			var md resource.MetadataResponse
			inner.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "gpuslice"}, &md)
			if md.TypeName != m.typeName {
				return inner
			}
			return &mutatedResource{Resource: inner, edit: m.edit}
		})
	}
	return out
}

type mutatedResource struct {
	resource.Resource
	edit func(schema.Schema) schema.Schema
}

func (m *mutatedResource) Schema(ctx context.Context, req resource.SchemaRequest, resp *resource.SchemaResponse) {
	m.Resource.Schema(ctx, req, resp)
	resp.Schema = m.edit(resp.Schema)
}

func (m *mutatedResource) IdentitySchema(ctx context.Context, req resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	m.Resource.(resource.ResourceWithIdentity).IdentitySchema(ctx, req, resp)
}

func (m *mutatedResource) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	m.Resource.(resource.ResourceWithConfigure).Configure(ctx, req, resp)
}

func (m *mutatedResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	m.Resource.(resource.ResourceWithModifyPlan).ModifyPlan(ctx, req, resp)
}

// schemaPaths are the dotted paths of every attribute and nested block of
// a schema, each with whether it is a block.
func schemaPaths(prefix string, attrs map[string]schema.Attribute, blocks map[string]schema.Block) map[string]bool {
	out := map[string]bool{}
	for name := range attrs {
		out[prefix+name] = false
	}
	for name, b := range blocks {
		out[prefix+name] = true
		var inner map[string]bool
		switch b := b.(type) {
		case schema.SingleNestedBlock:
			inner = schemaPaths(prefix+name+".", b.Attributes, b.Blocks)
		case schema.ListNestedBlock:
			inner = schemaPaths(prefix+name+".", b.NestedObject.Attributes, b.NestedObject.Blocks)
		}
		for k, v := range inner {
			out[k] = v
		}
	}
	return out
}

// editAt is s with the attribute or block at the dotted path replaced by
// f's edit of it, the maps on the way copied.
func editAt(s schema.Schema, at string, f func(any) any) schema.Schema {
	s.Attributes, s.Blocks = editIn(s.Attributes, s.Blocks, strings.Split(at, "."), f)
	return s
}

func editIn(attrs map[string]schema.Attribute, blocks map[string]schema.Block, p []string, f func(any) any) (map[string]schema.Attribute, map[string]schema.Block) {
	attrs, blocks = copyMap(attrs), copyMap(blocks)
	if a, ok := attrs[p[0]]; ok && len(p) == 1 {
		attrs[p[0]] = f(a).(schema.Attribute)
		return attrs, blocks
	}
	b := blocks[p[0]]
	if len(p) == 1 {
		blocks[p[0]] = f(b).(schema.Block)
		return attrs, blocks
	}
	switch nb := b.(type) {
	case schema.SingleNestedBlock:
		nb.Attributes, nb.Blocks = editIn(nb.Attributes, nb.Blocks, p[1:], f)
		blocks[p[0]] = nb
	case schema.ListNestedBlock:
		nb.NestedObject.Attributes, nb.NestedObject.Blocks = editIn(nb.NestedObject.Attributes, nb.NestedObject.Blocks, p[1:], f)
		blocks[p[0]] = nb
	}
	return attrs, blocks
}

func copyMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// setField is v (a schema struct) with field set to value, or appended
// to when the field is a slice; false when v has no such field.
func setField(v any, field string, value any) (any, bool) {
	rv := reflect.New(reflect.TypeOf(v)).Elem()
	rv.Set(reflect.ValueOf(v))
	f := rv.FieldByName(field)
	if !f.IsValid() {
		return nil, false
	}
	x := reflect.New(f.Type()).Elem()
	if f.Kind() == reflect.Slice {
		x = reflect.New(f.Type().Elem()).Elem()
	}
	x.Set(reflect.ValueOf(value))
	if f.Kind() == reflect.Slice {
		f.Set(reflect.Append(f, x))
	} else {
		f.Set(x)
	}
	return rv.Interface(), true
}

// Adding anything the fast path does not understand to any attribute or
// block of any resource makes that resource the framework's alone — and
// only that one: a validator, a plan modifier or a default of a type it
// has not listed, a deprecation, a sensitive or write-only attribute,
// validators on a list block's elements.
func TestWhatTheFastPathDoesNotUnderstandIsTheFrameworks(t *testing.T) {
	ctx := context.Background()
	real := provider.New("test")()
	plain := fastpath.New(nil, real, nil, fastpath.On, nil)
	if only := plain.FrameworkOnly(); len(only) > 0 {
		t.Fatalf("gpuslice's own resources left to the framework: %v", only)
	}
	mutations := map[string]struct {
		field string
		value any
	}{
		"validator":     {"Validators", unknownCheck{}},
		"plan modifier": {"PlanModifiers", unknownCheck{}},
		"default":       {"Default", unknownCheck{}},
		"deprecation":   {"DeprecationMessage", "use something else"},
		"sensitive":     {"Sensitive", true},
		"write-only":    {"WriteOnly", true},
	}
	tried := 0
	for _, typeName := range gpusliceTypes(t) {
		var sresp resource.SchemaResponse
		for _, r := range real.Resources(ctx) {
			res := r()
			var md resource.MetadataResponse
			res.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "gpuslice"}, &md)
			if md.TypeName == typeName {
				res.Schema(ctx, resource.SchemaRequest{}, &sresp)
			}
		}
		paths := schemaPaths("", sresp.Schema.Attributes, sresp.Schema.Blocks)
		var sorted []string
		for p := range paths {
			sorted = append(sorted, p)
		}
		sort.Strings(sorted)
		for _, at := range sorted {
			edits := map[string]func(any) (any, bool){}
			for name, m := range mutations {
				edits[name] = func(v any) (any, bool) { return setField(v, m.field, m.value) }
			}
			edits["element validator"] = func(v any) (any, bool) {
				lb, ok := v.(schema.ListNestedBlock)
				if !ok {
					return nil, false
				}
				lb.NestedObject.Validators = append(lb.NestedObject.Validators, unknownCheck{})
				return lb, true
			}
			for name, edit := range edits {
				applies := true
				mp := mutatedProvider{Provider: real, typeName: typeName, edit: func(s schema.Schema) schema.Schema {
					return editAt(s, at, func(v any) any {
						out, ok := edit(v)
						if !ok {
							applies = false
							return v
						}
						return out
					})
				}}
				s := fastpath.New(nil, mp, nil, fastpath.On, nil)
				if !applies {
					continue // (no such field on this kind of attribute or block)
				}
				tried++
				only := s.FrameworkOnly()
				if reason := only[typeName]; !strings.Contains(reason, at) {
					t.Errorf("%s with a %s at %s: left to the framework because %q, want a reason naming %s", typeName, name, at, reason, at)
				}
				if len(only) != 1 {
					t.Errorf("%s with a %s at %s: the framework's alone are %v, want only %s", typeName, name, at, only, typeName)
				}
			}
		}
	}
	if tried < 100 {
		t.Errorf("only %d edits tried", tried)
	}
	t.Logf("%d edits, each leaving its resource to the framework", tried)
}

// A validator the fast path does not know on the workload's container
// image: the workload's validation is the framework's, which runs it and
// reports what it refuses, where the unedited provider's would have been
// answered on the fast path without a word.
func TestAnUnknownValidatorIsRunByTheFramework(t *testing.T) {
	ctx := context.Background()
	real := provider.New("test")()
	mp := mutatedProvider{Provider: real, typeName: "gpuslice_workload", edit: func(s schema.Schema) schema.Schema {
		return editAt(s, "container.image", func(v any) any {
			a := v.(schema.StringAttribute)
			a.Validators = append(a.Validators, unknownCheck{})
			return a
		})
	}}
	ty, _, _ := fastpath.New(nil, real, nil, fastpath.On, nil).Types("gpuslice_workload")
	attrs := map[string]cty.Value{}
	for name, at := range ty.AttributeTypes() {
		attrs[name] = cty.NullVal(at)
	}
	container := blankObject(ty.AttributeType("container")).AsValueMap()
	container["image"] = cty.StringVal("ollama/ollama:0.24.0")
	attrs["container"] = cty.ObjectVal(container)
	attrs["namespace"], attrs["name"], attrs["package"] = cty.StringVal("team-a"), cty.StringVal("llm"), cty.StringVal("v100-8gi")
	config := cty.ObjectVal(attrs)
	for _, c := range []struct {
		name string
		p    fwprovider.Provider
		fast bool
	}{{"unedited", real, true}, {"with the validator", mp, false}} {
		t.Run(c.name, func(t *testing.T) {
			framework, err := providerserver.NewProtocol6WithError(c.p)()
			if err != nil {
				t.Fatal(err)
			}
			counts := &fastpath.Counts{}
			s := fastpath.New(framework, c.p, nil, fastpath.Check, counts)
			resp, err := s.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: "gpuslice_workload", Config: dynamic(t, config)})
			if err != nil {
				t.Fatal(err)
			}
			got := describe(resp.Diagnostics)
			if fast := counts.Validate.Load() > 0; fast != c.fast {
				t.Errorf("served on the fast path: %v, want %v", fast, c.fast)
			}
			if refused := strings.Contains(got, refusal); refused == c.fast || (c.fast && len(resp.Diagnostics) > 0) {
				t.Errorf("diagnostics %s", got)
			}
		})
	}
}
