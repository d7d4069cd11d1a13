package fastpath

// What the fast path understands of a resource's framework schema, and
// the schema it then works from. understand walks every attribute and
// nested block, field by field: a field it does not list, set to anything
// but its zero value, makes the resource the framework's alone, and so do
// a validator, plan modifier, default or custom type not on the lists
// below.

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/numberdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/provider/internal/tfschema"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

var (
	// validatorsRun are the string validators the fast path runs itself,
	// on the attribute's value alone (each reads nothing else of the
	// request): stringvalidator.OneOf and the timeouts block's duration
	// check.
	validatorsRun = typeSet(stringvalidator.OneOf(), timeoutsValidator())
	// blockValidators are the block validators the fast path redoes on the
	// block's value: objectvalidator.IsRequired (the block is there) and
	// tfschema.AlsoRequires (these attributes are set when the block is).
	blockValidators = typeSet(objectvalidator.IsRequired(), tfschema.AlsoRequires(nil))
	// modifiersUnchanged are the plan modifiers that change nothing in a
	// plan whose value equals the state's, the only plans the fast path
	// serves: RequiresReplace (and every RequiresReplaceIf, the same type)
	// returns when the plan value equals the state value, UseStateForUnknown
	// when the plan value is known.
	modifiersUnchanged = typeSet(stringplanmodifier.RequiresReplace(), stringplanmodifier.UseStateForUnknown())
	// staticDefaults are the defaults whose value depends on nothing: the
	// fast path asks each for its value once, at start-up.
	staticDefaults = typeSet(stringdefault.StaticString(""), numberdefault.StaticBigFloat(new(big.Float)), booldefault.StaticBool(false),
		listdefault.StaticValue(types.ListNull(types.StringType)), mapdefault.StaticValue(types.MapNull(types.StringType)))
	// plainCustomTypes are custom types whose values are their base
	// type's: timeouts.Type is an object type with no validation or
	// semantic equality of its own.
	plainCustomTypes = typeSet(timeouts.Type{})
	// plainElements are the element types of list and map attributes the
	// fast path handles.
	plainElements = typeSet(types.StringType, types.NumberType, types.BoolType)
)

func typeSet(values ...any) map[reflect.Type]bool {
	out := map[reflect.Type]bool{}
	for _, v := range values {
		out[reflect.TypeOf(v)] = true
	}
	return out
}

// timeoutsValidator is the validator the timeouts block puts on each of
// its attributes (its type is internal to that module).
func timeoutsValidator() validator.String {
	b := timeouts.Block(context.Background(), timeouts.Opts{Create: true}).(schema.SingleNestedBlock)
	return b.Attributes["create"].(schema.StringAttribute).Validators[0]
}

// resourceType is what the fast path knows of a resource type it serves.
type resourceType struct {
	name    string
	version int64
	// value and identity are the cty types of its values and identity, as
	// the framework schema implies them.
	value, identity cty.Type
	block           block
}

// block is a schema's or a nested block's attributes and blocks.
type block struct {
	attributes []attribute
	blocks     []nestedBlock
}

type attribute struct {
	name                         string
	required, optional, computed bool
	// validators run on a string attribute's value (validatorsRun).
	validators []validator.String
	// def is the default (cty.NilVal when none).
	def cty.Value
}

type nestedBlock struct {
	name string
	// list is true for a list block, false for a single one.
	list bool
	// required is objectvalidator.IsRequired's, alsoRequires
	// tfschema.AlsoRequires' attributes (single blocks).
	required     bool
	alsoRequires []string
	block
}

// understand returns the fast path's form of resource r (named name), or
// why it leaves r to the framework.
func understand(ctx context.Context, name string, r resource.Resource, behavior resource.ResourceBehavior) (*resourceType, string) {
	switch r.(type) {
	case resource.ResourceWithConfigValidators:
		return nil, "it has resource-level config validators"
	case resource.ResourceWithValidateConfig:
		return nil, "it has a ValidateConfig method"
	}
	if !reflect.ValueOf(behavior).IsZero() {
		return nil, fmt.Sprintf("its resource behavior is set (%+v)", behavior)
	}
	withIdentity, ok := r.(resource.ResourceWithIdentity)
	if !ok {
		return nil, "it has no identity schema"
	}
	var sresp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sresp)
	if sresp.Diagnostics.HasError() {
		return nil, fmt.Sprintf("its schema has errors: %v", sresp.Diagnostics)
	}
	s := sresp.Schema
	t := &resourceType{name: name, version: s.Version}
	var reasons []string
	fields(s, func(field string, v reflect.Value) {
		switch field {
		case "Description", "MarkdownDescription", "Version", "Attributes", "Blocks":
		default:
			reasons = append(reasons, fmt.Sprintf("the schema's %s is set", field))
		}
	})
	if len(reasons) > 0 {
		return nil, reasons[0]
	}
	b, reason := understandBlock(ctx, "", s.Attributes, s.Blocks)
	if reason != "" {
		return nil, reason
	}
	t.block = b
	value, err := tfvalue.CtyType(s.Type().TerraformType(ctx))
	if err != nil {
		return nil, fmt.Sprintf("its value type: %v", err)
	}
	t.value = value

	var iresp resource.IdentitySchemaResponse
	withIdentity.IdentitySchema(ctx, resource.IdentitySchemaRequest{}, &iresp)
	if iresp.Diagnostics.HasError() {
		return nil, fmt.Sprintf("its identity schema has errors: %v", iresp.Diagnostics)
	}
	// Read sets the identity's attributes as strings.
	for _, n := range sortedKeys(iresp.IdentitySchema.Attributes) {
		a, ok := iresp.IdentitySchema.Attributes[n].(identityschema.StringAttribute)
		if !ok || a.CustomType != nil {
			return nil, fmt.Sprintf("identity attribute %s is a %T", n, iresp.IdentitySchema.Attributes[n])
		}
	}
	identity, err := tfvalue.CtyType(iresp.IdentitySchema.Type().TerraformType(ctx))
	if err != nil {
		return nil, fmt.Sprintf("its identity type: %v", err)
	}
	t.identity = identity
	return t, ""
}

// understandBlock is understand of a block's attributes and blocks, at
// path prefix.
func understandBlock(ctx context.Context, prefix string, attrs map[string]schema.Attribute, blocks map[string]schema.Block) (block, string) {
	var out block
	for _, name := range sortedKeys(attrs) {
		a, reason := understandAttribute(ctx, prefix+name, attrs[name])
		if reason != "" {
			return block{}, reason
		}
		a.name = name
		out.attributes = append(out.attributes, a)
	}
	for _, name := range sortedKeys(blocks) {
		nb, reason := understandNested(ctx, prefix+name, blocks[name])
		if reason != "" {
			return block{}, reason
		}
		nb.name = name
		out.blocks = append(out.blocks, nb)
	}
	return out, ""
}

func understandAttribute(ctx context.Context, at string, a schema.Attribute) (attribute, string) {
	switch a.(type) {
	case schema.StringAttribute, schema.NumberAttribute, schema.BoolAttribute, schema.ListAttribute, schema.MapAttribute:
	default:
		return attribute{}, fmt.Sprintf("%s is a %T", at, a)
	}
	out := attribute{required: a.IsRequired(), optional: a.IsOptional(), computed: a.IsComputed(), def: cty.NilVal}
	var reasons []string
	fields(a, func(field string, v reflect.Value) {
		switch field {
		case "Description", "MarkdownDescription", "Required", "Optional", "Computed":
		case "ElementType":
			if !plainElements[reflect.TypeOf(v.Interface())] {
				reasons = append(reasons, fmt.Sprintf("%s has elements of type %v", at, v.Interface()))
			}
		case "Validators":
			for i := 0; i < v.Len(); i++ {
				val := v.Index(i).Interface()
				sv, ok := val.(validator.String)
				if !ok || !validatorsRun[reflect.TypeOf(val)] {
					reasons = append(reasons, fmt.Sprintf("%s has the validator %T (%q)", at, val, describe(ctx, val)))
					continue
				}
				out.validators = append(out.validators, sv)
			}
		case "PlanModifiers":
			for i := 0; i < v.Len(); i++ {
				if m := v.Index(i).Interface(); !modifiersUnchanged[reflect.TypeOf(m)] {
					reasons = append(reasons, fmt.Sprintf("%s has the plan modifier %T (%q)", at, m, describe(ctx, m)))
				}
			}
		case "Default":
			d := v.Interface()
			if !staticDefaults[reflect.TypeOf(d)] {
				reasons = append(reasons, fmt.Sprintf("%s has the default %T (%q)", at, d, describe(ctx, d)))
				return
			}
			def, err := defaultValue(ctx, d)
			if err != nil {
				reasons = append(reasons, fmt.Sprintf("%s: its default: %v", at, err))
				return
			}
			out.def = def
		default:
			reasons = append(reasons, fmt.Sprintf("%s has %s set", at, field))
		}
	})
	if len(reasons) > 0 {
		return attribute{}, reasons[0]
	}
	return out, ""
}

func understandNested(ctx context.Context, at string, b schema.Block) (nestedBlock, string) {
	var out nestedBlock
	var reasons []string
	var attrs map[string]schema.Attribute
	var blocks map[string]schema.Block
	objectFields := func(owner string) func(string, reflect.Value) {
		return func(field string, v reflect.Value) {
			switch field {
			case "Description", "MarkdownDescription":
			case "Attributes":
				attrs = v.Interface().(map[string]schema.Attribute)
			case "Blocks":
				blocks = v.Interface().(map[string]schema.Block)
			case "CustomType":
				if !plainCustomTypes[reflect.TypeOf(v.Interface())] {
					reasons = append(reasons, fmt.Sprintf("%s%s has the custom type %T", at, owner, v.Interface()))
				}
			case "Validators":
				if owner != "" {
					reasons = append(reasons, fmt.Sprintf("%s%s has validators", at, owner))
					return
				}
				for i := 0; i < v.Len(); i++ {
					val := v.Index(i).Interface()
					if !blockValidators[reflect.TypeOf(val)] {
						reasons = append(reasons, fmt.Sprintf("%s has the validator %T (%q)", at, val, describe(ctx, val)))
						continue
					}
					if also, ok := val.(tfschema.AlsoRequires); ok {
						out.alsoRequires = append(out.alsoRequires, also...)
					} else {
						out.required = true
					}
				}
			default:
				reasons = append(reasons, fmt.Sprintf("%s%s has %s set", at, owner, field))
			}
		}
	}
	switch b := b.(type) {
	case schema.SingleNestedBlock:
		fields(b, objectFields(""))
	case schema.ListNestedBlock:
		out.list = true
		fields(b, func(field string, v reflect.Value) {
			if field == "NestedObject" {
				fields(b.NestedObject, objectFields(" (its element)"))
				return
			}
			objectFields(" (the list)")(field, v)
		})
	default:
		return nestedBlock{}, fmt.Sprintf("%s is a %T", at, b)
	}
	if len(reasons) > 0 {
		return nestedBlock{}, reasons[0]
	}
	inner, reason := understandBlock(ctx, at+".", attrs, blocks)
	if reason != "" {
		return nestedBlock{}, reason
	}
	out.block = inner
	for _, name := range out.alsoRequires {
		if _, ok := attrs[name]; !ok {
			return nestedBlock{}, fmt.Sprintf("%s requires %s, which it does not have", at, name)
		}
	}
	return out, ""
}

// fields calls f with every field of struct s that is not its zero value.
func fields(s any, f func(field string, v reflect.Value)) {
	v := reflect.ValueOf(s)
	for i := 0; i < v.NumField(); i++ {
		if fv := v.Field(i); !fv.IsZero() {
			f(v.Type().Field(i).Name, fv)
		}
	}
}

func describe(ctx context.Context, v any) string {
	if d, ok := v.(interface{ Description(context.Context) string }); ok {
		return d.Description(ctx)
	}
	return ""
}

// defaultValue asks a static default for its value.
func defaultValue(ctx context.Context, d any) (cty.Value, error) {
	var v attr.Value
	var err error
	switch d := d.(type) {
	case defaults.String:
		var resp defaults.StringResponse
		d.DefaultString(ctx, defaults.StringRequest{}, &resp)
		v, err = resp.PlanValue, diagError(resp.Diagnostics.Errors())
	case defaults.Number:
		var resp defaults.NumberResponse
		d.DefaultNumber(ctx, defaults.NumberRequest{}, &resp)
		v, err = resp.PlanValue, diagError(resp.Diagnostics.Errors())
	case defaults.Bool:
		var resp defaults.BoolResponse
		d.DefaultBool(ctx, defaults.BoolRequest{}, &resp)
		v, err = resp.PlanValue, diagError(resp.Diagnostics.Errors())
	case defaults.List:
		var resp defaults.ListResponse
		d.DefaultList(ctx, defaults.ListRequest{}, &resp)
		v, err = resp.PlanValue, diagError(resp.Diagnostics.Errors())
	case defaults.Map:
		var resp defaults.MapResponse
		d.DefaultMap(ctx, defaults.MapRequest{}, &resp)
		v, err = resp.PlanValue, diagError(resp.Diagnostics.Errors())
	default:
		return cty.NilVal, fmt.Errorf("%T is no default the fast path reads", d)
	}
	if err != nil {
		return cty.NilVal, err
	}
	tv, err := v.ToTerraformValue(ctx)
	if err != nil {
		return cty.NilVal, err
	}
	return tfvalue.ToCty(tv)
}

func diagError(ds diag.Diagnostics) error {
	if len(ds) == 0 {
		return nil
	}
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.Summary()+": "+d.Detail())
	}
	return errors.New(strings.Join(parts, "; "))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
