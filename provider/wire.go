package provider

// The wire form of a resource's values: Terraform sends and takes them as
// MessagePack of the schema's implied type, which cty reads and writes
// directly (cty/msgpack is the encoding Terraform itself uses), so the
// fast path (server.go) needs no framework value in between.

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/provider/internal/tfvalue"
)

// wireType is what the fast path knows of one resource type: its engine
// schema, and the cty types of its values and of its identity, exactly as
// the framework schema implies them (the timeouts block included).
type wireType struct {
	def      engineschema.Resource
	value    cty.Type
	identity cty.Type
}

func newWireType(ctx context.Context, def engineschema.Resource) (*wireType, error) {
	r := &gpusliceResource{def: def}
	var sresp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sresp)
	value, err := tfvalue.CtyType(sresp.Schema.Type().TerraformType(ctx))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", def.Type, err)
	}
	var iresp resource.IdentitySchemaResponse
	r.IdentitySchema(ctx, resource.IdentitySchemaRequest{}, &iresp)
	identity, err := tfvalue.CtyType(iresp.IdentitySchema.Type().TerraformType(ctx))
	if err != nil {
		return nil, fmt.Errorf("%s identity: %w", def.Type, err)
	}
	return &wireType{def: def, value: value, identity: identity}, nil
}

// decode reads a MessagePack value of type ty; false when it is absent or
// sent as JSON (the fast path leaves those to the framework).
func decode(dv *tfprotov6.DynamicValue, ty cty.Type) (cty.Value, bool) {
	if dv == nil || len(dv.MsgPack) == 0 {
		return cty.NilVal, false
	}
	v, err := ctymsgpack.Unmarshal(dv.MsgPack, ty)
	if err != nil {
		return cty.NilVal, false
	}
	return v, true
}

func encode(v cty.Value, ty cty.Type) (*tfprotov6.DynamicValue, error) {
	b, err := ctymsgpack.Marshal(v, ty)
	if err != nil {
		return nil, err
	}
	return &tfprotov6.DynamicValue{MsgPack: b}, nil
}

// nullifyBlocks turns empty list blocks into null ones, recursively, as the
// framework does to every value it decodes: the engine's code sees the
// same values on both paths.
func nullifyBlocks(v cty.Value, b engineschema.Block) cty.Value {
	return mapBlocks(v, b, func(l cty.Value) cty.Value {
		if !l.IsNull() && l.IsKnown() && l.LengthInt() == 0 {
			return cty.NullVal(l.Type())
		}
		return l
	})
}

// reifyBlocks turns null list blocks into empty ones, recursively, as the
// framework does to every value it encodes: Terraform never has a null
// block list.
func reifyBlocks(v cty.Value, b engineschema.Block) cty.Value {
	return mapBlocks(v, b, func(l cty.Value) cty.Value {
		if l.IsNull() {
			return cty.ListValEmpty(l.Type().ElementType())
		}
		return l
	})
}

// mapBlocks applies f to every list block of v (after its elements), and
// rebuilds only the objects something changed in.
func mapBlocks(v cty.Value, b engineschema.Block, f func(cty.Value) cty.Value) cty.Value {
	if len(b.Blocks) == 0 || v.IsNull() || !v.IsKnown() {
		return v
	}
	var attrs map[string]cty.Value
	for _, nb := range b.Blocks {
		bv := v.GetAttr(nb.Name)
		out := bv
		switch nb.Nesting {
		case engineschema.NestingSingle:
			out = mapBlocks(bv, nb, f)
		case engineschema.NestingList:
			if !bv.IsNull() && bv.IsKnown() && bv.LengthInt() > 0 && len(nb.Blocks) > 0 {
				elems := bv.AsValueSlice()
				for i, e := range elems {
					elems[i] = mapBlocks(e, nb, f)
				}
				out = cty.ListVal(elems)
			}
			out = f(out)
		}
		if !out.RawEquals(bv) {
			if attrs == nil {
				attrs = v.AsValueMap()
			}
			attrs[nb.Name] = out
		}
	}
	if attrs == nil {
		return v
	}
	return cty.ObjectVal(attrs)
}

// protoDiagnostics converts framework diagnostics to the protocol's, as
// the framework's own server does.
func protoDiagnostics(ds diag.Diagnostics) []*tfprotov6.Diagnostic {
	var out []*tfprotov6.Diagnostic
	for _, d := range ds {
		pd := &tfprotov6.Diagnostic{Summary: d.Summary(), Detail: d.Detail(), Severity: tfprotov6.DiagnosticSeverityError}
		if d.Severity() == diag.SeverityWarning {
			pd.Severity = tfprotov6.DiagnosticSeverityWarning
		}
		if dp, ok := d.(diag.DiagnosticWithPath); ok {
			pd.Attribute = attributePath(dp.Path())
		}
		out = append(out, pd)
	}
	return out
}

func attributePath(p path.Path) *tftypes.AttributePath {
	out := tftypes.NewAttributePath()
	for _, step := range p.Steps() {
		switch s := step.(type) {
		case path.PathStepAttributeName:
			out = out.WithAttributeName(string(s))
		case path.PathStepElementKeyInt:
			out = out.WithElementKeyInt(int(s))
		case path.PathStepElementKeyString:
			out = out.WithElementKeyString(string(s))
		}
	}
	return out
}
