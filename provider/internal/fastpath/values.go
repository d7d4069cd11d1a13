package fastpath

// Values on the wire: Terraform sends and takes them as MessagePack of the
// schema's implied type, which cty reads and writes directly (cty/msgpack
// is the encoding Terraform itself uses), so the fast path needs no
// framework value in between.

import (
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
)

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

// nullify turns empty list blocks into null ones, recursively: the
// framework's NullifyCollectionBlocks, which it applies to every value it
// decodes, so the provider's code sees the same values on both paths.
func (b block) nullify(v cty.Value) cty.Value {
	return b.mapBlocks(v, func(l cty.Value) cty.Value {
		if !l.IsNull() && l.IsKnown() && l.LengthInt() == 0 {
			return cty.NullVal(l.Type())
		}
		return l
	})
}

// reify turns null list blocks into empty ones, recursively: the
// framework's ReifyNullCollectionBlocks, which it applies to every value
// it encodes (Terraform never has a null block list).
func (b block) reify(v cty.Value) cty.Value {
	return b.mapBlocks(v, func(l cty.Value) cty.Value {
		if l.IsNull() {
			return cty.ListValEmpty(l.Type().ElementType())
		}
		return l
	})
}

// mapBlocks applies f to every list block of v (after its elements), and
// rebuilds only the objects something changed in.
func (b block) mapBlocks(v cty.Value, f func(cty.Value) cty.Value) cty.Value {
	if len(b.blocks) == 0 || v.IsNull() || !v.IsKnown() {
		return v
	}
	var attrs map[string]cty.Value
	for _, nb := range b.blocks {
		bv := v.GetAttr(nb.name)
		out := bv
		if !nb.list {
			out = nb.mapBlocks(bv, f)
		} else {
			if !bv.IsNull() && bv.IsKnown() && bv.LengthInt() > 0 && len(nb.blocks) > 0 {
				elems := bv.AsValueSlice()
				for i, e := range elems {
					elems[i] = nb.mapBlocks(e, f)
				}
				out = cty.ListVal(elems)
			}
			out = f(out)
		}
		if !out.RawEquals(bv) {
			if attrs == nil {
				attrs = v.AsValueMap()
			}
			attrs[nb.name] = out
		}
	}
	if attrs == nil {
		return v
	}
	return cty.ObjectVal(attrs)
}

// protoDiagnostics converts framework diagnostics to the protocol's, as
// the framework's own server does; false for one whose path it cannot
// write (the framework answers then).
func protoDiagnostics(ds diag.Diagnostics) ([]*tfprotov6.Diagnostic, bool) {
	var out []*tfprotov6.Diagnostic
	for _, d := range ds {
		pd := &tfprotov6.Diagnostic{Summary: d.Summary(), Detail: d.Detail(), Severity: tfprotov6.DiagnosticSeverityError}
		if d.Severity() == diag.SeverityWarning {
			pd.Severity = tfprotov6.DiagnosticSeverityWarning
		}
		if dp, ok := d.(diag.DiagnosticWithPath); ok {
			p, ok := attributePath(dp.Path())
			if !ok {
				return nil, false
			}
			pd.Attribute = p
		}
		out = append(out, pd)
	}
	return out, true
}

func attributePath(p path.Path) (*tftypes.AttributePath, bool) {
	out := tftypes.NewAttributePath()
	for _, step := range p.Steps() {
		switch s := step.(type) {
		case path.PathStepAttributeName:
			out = out.WithAttributeName(string(s))
		case path.PathStepElementKeyInt:
			out = out.WithElementKeyInt(int(s))
		case path.PathStepElementKeyString:
			out = out.WithElementKeyString(string(s))
		default:
			return nil, false
		}
	}
	return out, true
}
