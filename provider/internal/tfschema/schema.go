// Package tfschema builds the provider's resource schemas from
// engine/schema, the one declaration of every attribute that the CLI's HCL
// front end reads too, so `gpuslice plan` and `terraform plan` accept
// exactly the same blocks.
package tfschema

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/helpers/validatordiag"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/numberdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/zclconf/go-cty/cty"

	engineschema "github.com/gpuslice/gpuslice/engine/schema"
)

// Resource converts an engine resource to a framework schema.
func Resource(r engineschema.Resource) schema.Schema {
	attrs, blocks := convertBlock(r.Block)
	return schema.Schema{
		Description:         r.Description,
		MarkdownDescription: r.Description + "\n\nImport ID: " + importID(r.ImportID) + ".",
		Attributes:          attrs,
		Blocks:              blocks,
	}
}

func convertBlock(b engineschema.Block) (map[string]schema.Attribute, map[string]schema.Block) {
	attrs := map[string]schema.Attribute{}
	for _, a := range b.Attributes {
		attrs[a.Name] = convertAttribute(a)
	}
	blocks := map[string]schema.Block{}
	for _, nb := range b.Blocks {
		switch nb.Nesting {
		case engineschema.NestingSingle:
			blocks[nb.Name] = singleBlock(nb)
		case engineschema.NestingList:
			nested, nestedBlocks := convertBlock(nb)
			blocks[nb.Name] = schema.ListNestedBlock{Description: nb.Description, MarkdownDescription: nb.Description,
				NestedObject: schema.NestedBlockObject{Attributes: nested, Blocks: nestedBlocks}}
		}
	}
	return attrs, blocks
}

// singleBlock converts a block that appears at most once. The framework
// would demand its required attributes even when the block is left out, so
// they are optional in the schema and required by a validator on the block
// when it is present.
func singleBlock(b engineschema.Block) schema.SingleNestedBlock {
	inner := b
	inner.Attributes = nil
	var needed []string
	for _, a := range b.Attributes {
		if a.Required {
			a.Required = false
			a.Description += " Required in this block."
			needed = append(needed, a.Name)
		}
		inner.Attributes = append(inner.Attributes, a)
	}
	nested, nestedBlocks := convertBlock(inner)
	var validators []validator.Object
	desc := b.Description
	if b.Required {
		validators = append(validators, objectvalidator.IsRequired())
		desc += " Required."
	}
	if len(needed) > 0 {
		validators = append(validators, AlsoRequires(needed))
	}
	return schema.SingleNestedBlock{Description: desc, MarkdownDescription: desc, Attributes: nested, Blocks: nestedBlocks, Validators: validators}
}

// AlsoRequires is objectvalidator.AlsoRequires of the block's own
// attributes, named, with the same diagnostics, read from the block's
// value itself: objectvalidator.AlsoRequires resolves each path by walking
// the whole configuration, schema lookups at every step, which was a tenth
// of the provider's CPU in a plan of 200 workloads. (Exported for the
// provider's fast path, which reads the names.)
type AlsoRequires []string

func (a AlsoRequires) Description(ctx context.Context) string { return a.MarkdownDescription(ctx) }

func (a AlsoRequires) MarkdownDescription(context.Context) string {
	var exprs path.Expressions
	for _, name := range a {
		exprs = append(exprs, path.MatchRelative().AtName(name))
	}
	return fmt.Sprintf("Ensure that if an attribute is set, also these are set: %q", exprs)
}

func (a AlsoRequires) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	attrs := req.ConfigValue.Attributes()
	for _, name := range a {
		v, ok := attrs[name]
		if !ok {
			continue
		}
		if v.IsUnknown() {
			return // checked once every value is known
		}
		if v.IsNull() {
			p := req.Path.AtName(name)
			resp.Diagnostics.Append(validatordiag.InvalidAttributeCombinationDiagnostic(req.Path,
				fmt.Sprintf("Attribute %q must be specified when %q is specified", p, req.Path)))
		}
	}
}

// flags are the Required/Optional/Computed combination of an attribute:
// one with a default is optional and computed (the default fills it in),
// and so is an inferred one (the engine fills it in at plan).
type flags struct{ required, optional, computed bool }

func flagsOf(a engineschema.Attribute) flags {
	switch {
	case a.Required:
		return flags{required: true}
	case a.Computed:
		return flags{computed: true}
	case a.Default != cty.NilVal, a.Inferred:
		return flags{optional: true, computed: true}
	}
	return flags{optional: true}
}

func convertAttribute(a engineschema.Attribute) schema.Attribute {
	f := flagsOf(a)
	desc := a.Description
	if a.ForceNew {
		desc += " Changing it replaces the resource."
	}
	switch {
	case a.Type == cty.String:
		s := schema.StringAttribute{Description: desc, MarkdownDescription: desc, Required: f.required, Optional: f.optional, Computed: f.computed}
		if a.Default != cty.NilVal {
			s.Default = stringdefault.StaticString(a.Default.AsString())
		}
		if a.ForceNew {
			s.PlanModifiers = append(s.PlanModifiers, stringplanmodifier.RequiresReplace())
		}
		if a.Computed && a.Name == "id" {
			s.PlanModifiers = append(s.PlanModifiers, stringplanmodifier.UseStateForUnknown())
		}
		if len(a.OneOf) > 0 {
			s.Validators = append(s.Validators, stringvalidator.OneOf(a.OneOf...))
		}
		return s
	case a.Type == cty.Number:
		s := schema.NumberAttribute{Description: desc, MarkdownDescription: desc, Required: f.required, Optional: f.optional, Computed: f.computed}
		if a.Default != cty.NilVal {
			s.Default = numberdefault.StaticBigFloat(a.Default.AsBigFloat())
		}
		return s
	case a.Type == cty.Bool:
		s := schema.BoolAttribute{Description: desc, MarkdownDescription: desc, Required: f.required, Optional: f.optional, Computed: f.computed}
		if a.Default != cty.NilVal {
			s.Default = booldefault.StaticBool(a.Default.True())
		}
		return s
	case a.Type.IsListType():
		s := schema.ListAttribute{ElementType: attrType(a.Type.ElementType()), Description: desc, MarkdownDescription: desc, Required: f.required, Optional: f.optional, Computed: f.computed}
		if a.Default != cty.NilVal {
			s.Default = listdefault.StaticValue(listValue(a.Default))
		}
		return s
	case a.Type.IsMapType():
		s := schema.MapAttribute{ElementType: attrType(a.Type.ElementType()), Description: desc, MarkdownDescription: desc, Required: f.required, Optional: f.optional, Computed: f.computed}
		if a.Default != cty.NilVal {
			s.Default = mapdefault.StaticValue(mapValue(a.Default))
		}
		return s
	}
	panic(fmt.Sprintf("provider: attribute %s has type %s, which the schema converter does not handle", a.Name, a.Type.FriendlyName()))
}

func attrType(t cty.Type) attr.Type {
	switch t {
	case cty.String:
		return types.StringType
	case cty.Number:
		return types.NumberType
	case cty.Bool:
		return types.BoolType
	}
	panic(fmt.Sprintf("provider: element type %s is not handled", t.FriendlyName()))
}

func listValue(v cty.Value) types.List {
	var elems []attr.Value
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		elems = append(elems, primitive(e))
	}
	return types.ListValueMust(attrType(v.Type().ElementType()), elems)
}

func mapValue(v cty.Value) types.Map {
	elems := map[string]attr.Value{}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		elems[k.AsString()] = primitive(e)
	}
	return types.MapValueMust(attrType(v.Type().ElementType()), elems)
}

func primitive(e cty.Value) attr.Value {
	switch e.Type() {
	case cty.String:
		return types.StringValue(e.AsString())
	case cty.Number:
		return types.NumberValue(e.AsBigFloat())
	}
	return types.BoolValue(e.True())
}

// importID quotes the ID format of an engine import ID description
// ("<namespace>/<name>", or "<name>, the DeviceClass name") as code.
func importID(doc string) string {
	format, rest, _ := strings.Cut(doc, ",")
	if rest != "" {
		rest = "," + rest
	}
	return "`" + format + "`" + rest
}
