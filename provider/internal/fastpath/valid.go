package fastpath

// The framework's schema work on a request, redone on cty values for the
// schemas the fast path understands (schema.go): whether validation would
// find nothing, and the defaults a plan fills in. Either answers "not sure"
// (false) where the fast path then hands the request to the framework,
// which says exactly what is wrong.

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/zclconf/go-cty/cty"
)

// certainlyValid reports whether the framework's schema validation of
// cfg, a block's known configuration (null for a single block left out),
// would find nothing: no read-only attribute set, no required one
// missing, every validator passed, every required single block there with
// the attributes it requires.
func (b block) certainlyValid(ctx context.Context, cfg cty.Value) bool {
	for _, a := range b.attributes {
		v := cty.NullVal(cfg.Type().AttributeType(a.name))
		if !cfg.IsNull() {
			v = cfg.GetAttr(a.name)
		}
		switch {
		case a.required && v.IsNull():
			return false
		case a.computed && !a.optional && !a.required && !v.IsNull():
			return false
		}
		if len(a.validators) > 0 && !stringValid(ctx, a.validators, v) {
			return false
		}
	}
	for _, nb := range b.blocks {
		bv := cty.NullVal(cfg.Type().AttributeType(nb.name))
		if !cfg.IsNull() {
			bv = cfg.GetAttr(nb.name)
		}
		if !bv.IsKnown() {
			continue // validated once known
		}
		if !nb.list {
			if !nb.singleValid(ctx, bv) {
				return false
			}
			continue
		}
		if bv.IsNull() {
			continue
		}
		for it := bv.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			if ev.IsKnown() && (ev.IsNull() || !nb.certainlyValid(ctx, ev)) {
				return false
			}
		}
	}
	return true
}

// singleValid is certainlyValid of a single block, with its own validators:
// IsRequired wants it there, AlsoRequires wants these attributes set when
// it is (and says nothing while one of them is unknown).
func (nb nestedBlock) singleValid(ctx context.Context, bv cty.Value) bool {
	if bv.IsNull() && nb.required {
		return false
	}
	if !bv.IsNull() {
		for _, name := range nb.alsoRequires {
			v := bv.GetAttr(name)
			if !v.IsKnown() {
				break
			}
			if v.IsNull() {
				return false
			}
		}
	}
	return nb.certainlyValid(ctx, bv)
}

// stringValid runs a string attribute's validators on its value.
func stringValid(ctx context.Context, validators []validator.String, v cty.Value) bool {
	sv := types.StringNull()
	switch {
	case v.Type() != cty.String:
		return false
	case !v.IsKnown():
		sv = types.StringUnknown()
	case !v.IsNull():
		sv = types.StringValue(v.AsString())
	}
	req := validator.StringRequest{ConfigValue: sv}
	for _, val := range validators {
		var resp validator.StringResponse
		val.ValidateString(ctx, req, &resp)
		if len(resp.Diagnostics) > 0 {
			return false
		}
	}
	return true
}

// withDefaults is planned with every attribute the configuration leaves
// null set to its default, as the framework's plan does first (changed
// says whether any was); ok is false when the two values do not line up
// element for element.
func (b block) withDefaults(planned, cfg cty.Value) (out cty.Value, changed, ok bool) {
	if planned.IsNull() || cfg.IsNull() {
		return planned, false, planned.IsNull() == cfg.IsNull()
	}
	if !planned.IsKnown() || !cfg.IsKnown() {
		return planned, false, false
	}
	var attrs map[string]cty.Value
	set := func(name string, v cty.Value) {
		if attrs == nil {
			attrs = planned.AsValueMap()
		}
		attrs[name] = v
	}
	for _, a := range b.attributes {
		if a.def != cty.NilVal && cfg.GetAttr(a.name).IsNull() && !planned.GetAttr(a.name).RawEquals(a.def) {
			set(a.name, a.def)
		}
	}
	for _, nb := range b.blocks {
		pv, cv := planned.GetAttr(nb.name), cfg.GetAttr(nb.name)
		if !nb.list {
			v, c, ok := nb.withDefaults(pv, cv)
			if !ok {
				return planned, false, false
			}
			if c {
				set(nb.name, v)
			}
			continue
		}
		if pv.IsNull() || cv.IsNull() {
			other := pv
			if pv.IsNull() {
				other = cv
			}
			if !other.IsNull() && (!other.IsKnown() || other.LengthInt() > 0) {
				return planned, false, false
			}
			continue
		}
		if !pv.IsKnown() || !cv.IsKnown() || pv.LengthInt() != cv.LengthInt() {
			return planned, false, false
		}
		pe, ce := pv.AsValueSlice(), cv.AsValueSlice()
		anyChanged := false
		for i := range pe {
			v, c, ok := nb.withDefaults(pe[i], ce[i])
			if !ok {
				return planned, false, false
			}
			if c {
				pe[i], anyChanged = v, true
			}
		}
		if anyChanged {
			set(nb.name, cty.ListVal(pe))
		}
	}
	if attrs == nil {
		return planned, false, true
	}
	return cty.ObjectVal(attrs), true, true
}
