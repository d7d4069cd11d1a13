package provider

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	enginediag "github.com/gpuslice/gpuslice/engine/diag"
)

// Values cross from the framework to the engine as cty values, the form the
// HCL front end decodes, through MessagePack: the encoding Terraform itself
// uses for both, unknown values included.

func ctyType(t tftypes.Type) (cty.Type, error) {
	switch {
	case t.Is(tftypes.String):
		return cty.String, nil
	case t.Is(tftypes.Number):
		return cty.Number, nil
	case t.Is(tftypes.Bool):
		return cty.Bool, nil
	case t.Is(tftypes.DynamicPseudoType):
		return cty.DynamicPseudoType, nil
	}
	switch tt := t.(type) {
	case tftypes.List:
		e, err := ctyType(tt.ElementType)
		return cty.List(e), err
	case tftypes.Set:
		e, err := ctyType(tt.ElementType)
		return cty.Set(e), err
	case tftypes.Map:
		e, err := ctyType(tt.ElementType)
		return cty.Map(e), err
	case tftypes.Object:
		attrs := map[string]cty.Type{}
		for name, at := range tt.AttributeTypes {
			ct, err := ctyType(at)
			if err != nil {
				return cty.NilType, err
			}
			attrs[name] = ct
		}
		return cty.Object(attrs), nil
	}
	return cty.NilType, fmt.Errorf("type %s has no cty equivalent", t)
}

// toCty converts a framework value (plan, state or config) to cty.
func toCty(v tftypes.Value) (cty.Value, error) {
	ty, err := ctyType(v.Type())
	if err != nil {
		return cty.NilVal, err
	}
	data, err := v.MarshalMsgPack(v.Type()) //nolint:staticcheck // the wire format both sides share
	if err != nil {
		return cty.NilVal, fmt.Errorf("encode %s: %w", v.Type(), err)
	}
	return ctymsgpack.Unmarshal(data, ty)
}

// fromCty converts a cty value of the schema's type back.
func fromCty(v cty.Value, ty tftypes.Type) (tftypes.Value, error) {
	data, err := ctymsgpack.Marshal(v, v.Type())
	if err != nil {
		return tftypes.Value{}, fmt.Errorf("encode value: %w", err)
	}
	return tftypes.ValueFromMsgPack(data, ty)
}

// attributePath turns an engine attribute path (`container.port[0].name`,
// `slices["v100-8gi"]`) into a framework path; empty means the resource.
func attributePath(attribute string) (path.Path, bool) {
	if attribute == "" {
		return path.Empty(), false
	}
	var p path.Path
	first := true
	for _, part := range splitPath(attribute) {
		name, rest, _ := strings.Cut(part, "[")
		if first {
			p, first = path.Root(name), false
		} else {
			p = p.AtName(name)
		}
		for rest != "" {
			key, after, ok := strings.Cut(rest, "]")
			if !ok {
				return path.Empty(), false
			}
			if n, err := strconv.Atoi(key); err == nil {
				p = p.AtListIndex(n)
			} else if s, err := strconv.Unquote(key); err == nil {
				p = p.AtMapKey(s)
			} else {
				return path.Empty(), false
			}
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return p, true
}

// splitPath splits on dots outside quoted map keys.
func splitPath(s string) []string {
	var parts []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' && (i == 0 || s[i-1] != '\\'):
			quoted = !quoted
		case c == '.' && !quoted:
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(c)
	}
	return append(parts, cur.String())
}

// addDiagnostics reports engine diagnostics on their attributes.
func addDiagnostics(out *diag.Diagnostics, ds enginediag.Diagnostics) {
	for _, d := range ds {
		summary, detail := d.Summary, d.Detail
		p, ok := attributePath(d.Attribute)
		switch {
		case ok && d.Severity == enginediag.Warning:
			out.AddAttributeWarning(p, summary, detail)
		case ok:
			out.AddAttributeError(p, summary, detail)
		case d.Severity == enginediag.Warning:
			out.AddWarning(summary, detail)
		default:
			out.AddError(summary, detail)
		}
	}
}
