// Package tfvalue carries values across the gpuslice provider's boundary:
// terraform-plugin-framework values to and from cty (the form the engine
// decodes, unknown and null keeping their meaning), engine attribute paths
// to framework paths, and engine diagnostics to framework diagnostics.
package tfvalue

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"

	enginediag "github.com/gpuslice/gpuslice/engine/diag"
)

// CtyType is the cty type of a framework (tftypes) type.
func CtyType(t tftypes.Type) (cty.Type, error) {
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
		e, err := CtyType(tt.ElementType)
		return cty.List(e), err
	case tftypes.Set:
		e, err := CtyType(tt.ElementType)
		return cty.Set(e), err
	case tftypes.Map:
		e, err := CtyType(tt.ElementType)
		return cty.Map(e), err
	case tftypes.Object:
		attrs := map[string]cty.Type{}
		for name, at := range tt.AttributeTypes {
			ct, err := CtyType(at)
			if err != nil {
				return cty.NilType, err
			}
			attrs[name] = ct
		}
		return cty.Object(attrs), nil
	}
	return cty.NilType, fmt.Errorf("type %s has no cty equivalent", t)
}

// ToCty converts a framework value (plan, state or config) to cty.
func ToCty(v tftypes.Value) (cty.Value, error) {
	ty, err := CtyType(v.Type())
	if err != nil {
		return cty.NilVal, err
	}
	switch {
	case !v.IsKnown():
		return cty.UnknownVal(ty), nil
	case v.IsNull():
		return cty.NullVal(ty), nil
	case ty == cty.String:
		var s string
		err = v.As(&s)
		return cty.StringVal(s), err
	case ty == cty.Number:
		f := new(big.Float)
		err = v.As(&f)
		return cty.NumberVal(f), err
	case ty == cty.Bool:
		var b bool
		err = v.As(&b)
		return cty.BoolVal(b), err
	case ty.IsListType() || ty.IsSetType():
		var elems []tftypes.Value
		if err := v.As(&elems); err != nil {
			return cty.NilVal, err
		}
		vals, err := ctyValues(elems)
		if err != nil {
			return cty.NilVal, err
		}
		switch {
		case len(vals) == 0 && ty.IsListType():
			return cty.ListValEmpty(ty.ElementType()), nil
		case len(vals) == 0:
			return cty.SetValEmpty(ty.ElementType()), nil
		case ty.IsListType():
			return cty.ListVal(vals), nil
		}
		return cty.SetVal(vals), nil
	case ty.IsMapType() || ty.IsObjectType():
		var elems map[string]tftypes.Value
		if err := v.As(&elems); err != nil {
			return cty.NilVal, err
		}
		vals := map[string]cty.Value{}
		for k, e := range elems {
			if vals[k], err = ToCty(e); err != nil {
				return cty.NilVal, err
			}
		}
		switch {
		case ty.IsObjectType():
			return cty.ObjectVal(vals), nil
		case len(vals) == 0:
			return cty.MapValEmpty(ty.ElementType()), nil
		}
		return cty.MapVal(vals), nil
	}
	return cty.NilVal, fmt.Errorf("cannot convert a %s value", v.Type())
}

func ctyValues(elems []tftypes.Value) ([]cty.Value, error) {
	var out []cty.Value
	for _, e := range elems {
		c, err := ToCty(e)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// FromCty converts a cty value to a framework value of type ty.
func FromCty(v cty.Value, ty tftypes.Type) (tftypes.Value, error) {
	switch {
	case !v.IsKnown():
		return tftypes.NewValue(ty, tftypes.UnknownValue), nil
	case v.IsNull():
		return tftypes.NewValue(ty, nil), nil
	case ty.Is(tftypes.String):
		return tftypes.NewValue(ty, v.AsString()), nil
	case ty.Is(tftypes.Number):
		return tftypes.NewValue(ty, v.AsBigFloat()), nil
	case ty.Is(tftypes.Bool):
		return tftypes.NewValue(ty, v.True()), nil
	}
	switch tt := ty.(type) {
	case tftypes.List, tftypes.Set:
		elemType := elementType(tt)
		var elems []tftypes.Value
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			fe, err := FromCty(e, elemType)
			if err != nil {
				return tftypes.Value{}, err
			}
			elems = append(elems, fe)
		}
		return tftypes.NewValue(ty, elems), nil
	case tftypes.Map:
		elems := map[string]tftypes.Value{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			fe, err := FromCty(e, tt.ElementType)
			if err != nil {
				return tftypes.Value{}, err
			}
			elems[k.AsString()] = fe
		}
		return tftypes.NewValue(ty, elems), nil
	case tftypes.Object:
		attrs := map[string]tftypes.Value{}
		for name, at := range tt.AttributeTypes {
			av := cty.NullVal(cty.DynamicPseudoType)
			if v.Type().HasAttribute(name) {
				av = v.GetAttr(name)
			}
			fa, err := FromCty(av, at)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("%s: %w", name, err)
			}
			attrs[name] = fa
		}
		return tftypes.NewValue(ty, attrs), nil
	}
	return tftypes.Value{}, fmt.Errorf("cannot convert to %s", ty)
}

func elementType(t tftypes.Type) tftypes.Type {
	if l, ok := t.(tftypes.List); ok {
		return l.ElementType
	}
	return t.(tftypes.Set).ElementType
}

// AttributePath turns an engine attribute path (`container.port[0].name`,
// `slices["v100-8gi"]`) into a framework path; empty means the resource.
func AttributePath(attribute string) (path.Path, bool) {
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

// AddDiagnostics reports engine diagnostics on their attributes.
func AddDiagnostics(out *diag.Diagnostics, ds enginediag.Diagnostics) {
	for _, d := range ds {
		summary, detail := d.Summary, d.Detail
		p, ok := AttributePath(d.Attribute)
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

// Strings reads a list of strings; unknown is set when the list or an
// element is known only after apply.
func Strings(l types.List) (out []string, unknown bool) {
	if l.IsUnknown() {
		return nil, true
	}
	for _, e := range l.Elements() {
		s, ok := e.(types.String)
		if !ok || s.IsUnknown() {
			return nil, true
		}
		out = append(out, s.ValueString())
	}
	return out, false
}

// Primitive converts a string or number, as computed attributes hold, to
// its framework value.
func Primitive(v cty.Value) attr.Value {
	switch {
	case v.Type() == cty.String && !v.IsKnown():
		return types.StringUnknown()
	case v.Type() == cty.String && v.IsNull():
		return types.StringNull()
	case v.Type() == cty.String:
		return types.StringValue(v.AsString())
	case v.Type() == cty.Number && !v.IsKnown():
		return types.NumberUnknown()
	case v.Type() == cty.Number && v.IsNull():
		return types.NumberNull()
	case v.Type() == cty.Number:
		return types.NumberValue(v.AsBigFloat())
	}
	panic(fmt.Sprintf("provider: computed attribute of type %s", v.Type().FriendlyName()))
}
