package provider

// What the framework's schema work on a request amounts to for gpuslice's
// schemas (tfschema), redone on cty values for the fast path: whether
// validation would find nothing, and the defaults a plan fills in. Either
// answers "not sure" (false) where the fast path then hands the request to
// the framework, which says exactly what is wrong.

import (
	"time"

	"github.com/zclconf/go-cty/cty"

	engineschema "github.com/gpuslice/gpuslice/engine/schema"
)

// certainlyValid reports whether the framework's schema validation of
// cfg, a block's configuration, would find nothing: no read-only attribute
// set, no required one missing, every one_of respected, every required or
// partly required single block whole.
func certainlyValid(cfg cty.Value, b engineschema.Block) bool {
	if !cfg.IsKnown() || cfg.IsNull() {
		return false
	}
	for _, a := range b.Attributes {
		v := cfg.GetAttr(a.Name)
		switch { // (tfschema's flags: required wins, then computed)
		case a.Required && v.IsNull():
			return false
		case !a.Required && a.Computed && !v.IsNull():
			return false
		}
		if len(a.OneOf) > 0 && v.IsKnown() && !v.IsNull() && !oneOf(v.AsString(), a.OneOf) {
			return false
		}
	}
	for _, nb := range b.Blocks {
		bv := cfg.GetAttr(nb.Name)
		if !bv.IsKnown() {
			continue // validated once known
		}
		if nb.Nesting == engineschema.NestingSingle {
			if !singleBlockValid(bv, nb) {
				return false
			}
			continue
		}
		if bv.IsNull() {
			continue
		}
		for it := bv.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			if ev.IsKnown() && !certainlyValid(ev, nb) {
				return false
			}
		}
	}
	return true
}

// singleBlockValid is certainlyValid of a block that appears at most once,
// its required attributes demanded only when it is there (tfschema's
// singleBlock and alsoRequires).
func singleBlockValid(bv cty.Value, b engineschema.Block) bool {
	if bv.IsNull() {
		return !b.Required
	}
	relaxed := b
	relaxed.Attributes = nil
	for _, a := range b.Attributes {
		if a.Required {
			if v := bv.GetAttr(a.Name); v.IsKnown() && v.IsNull() {
				return false
			}
			a.Required = false
		}
		relaxed.Attributes = append(relaxed.Attributes, a)
	}
	return certainlyValid(bv, relaxed)
}

// timeoutsValid reports whether a timeouts block's values are all
// durations, as its validators demand.
func timeoutsValid(tv cty.Value) bool {
	if tv.IsNull() {
		return true
	}
	if !tv.IsKnown() {
		return false
	}
	for it := tv.ElementIterator(); it.Next(); {
		_, v := it.Element()
		if !v.IsKnown() || v.IsNull() {
			continue
		}
		if _, err := time.ParseDuration(v.AsString()); err != nil {
			return false
		}
	}
	return true
}

func oneOf(s string, allowed []string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

// withDefaults is planned with every attribute the configuration leaves
// null set to its default, as the framework's plan does first (changed
// says whether any was); ok is false when the two values do not line up
// element for element.
func withDefaults(planned, cfg cty.Value, b engineschema.Block) (out cty.Value, changed, ok bool) {
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
	for _, a := range b.Attributes {
		if a.Default != cty.NilVal && cfg.GetAttr(a.Name).IsNull() && !planned.GetAttr(a.Name).RawEquals(a.Default) {
			set(a.Name, a.Default)
		}
	}
	for _, nb := range b.Blocks {
		pv, cv := planned.GetAttr(nb.Name), cfg.GetAttr(nb.Name)
		if nb.Nesting == engineschema.NestingSingle {
			v, c, ok := withDefaults(pv, cv, nb)
			if !ok {
				return planned, false, false
			}
			if c {
				set(nb.Name, v)
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
			v, c, ok := withDefaults(pe[i], ce[i], nb)
			if !ok {
				return planned, false, false
			}
			if c {
				pe[i], anyChanged = v, true
			}
		}
		if anyChanged {
			set(nb.Name, cty.ListVal(pe))
		}
	}
	if attrs == nil {
		return planned, false, true
	}
	return cty.ObjectVal(attrs), true, true
}
