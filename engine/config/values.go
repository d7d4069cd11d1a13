package config

import (
	"fmt"
	"math"
	"math/big"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/schema"
)

// WithDefaults replaces null attributes with their schema defaults, in
// nested blocks too.
func WithDefaults(val cty.Value, b schema.Block) cty.Value {
	if val.IsNull() || !val.IsKnown() {
		return val
	}
	attrs := val.AsValueMap()
	if attrs == nil {
		attrs = map[string]cty.Value{}
	}
	for _, a := range b.Attributes {
		if v, ok := attrs[a.Name]; ok && v.IsNull() && a.Default != cty.NilVal {
			attrs[a.Name] = a.Default
		}
	}
	for _, nb := range b.Blocks {
		v, ok := attrs[nb.Name]
		if !ok || v.IsNull() || !v.IsKnown() {
			continue
		}
		if nb.Nesting == schema.NestingSingle {
			attrs[nb.Name] = WithDefaults(v, nb)
			continue
		}
		var elems []cty.Value
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			elems = append(elems, WithDefaults(ev, nb))
		}
		if len(elems) == 0 {
			continue
		}
		attrs[nb.Name] = cty.ListVal(elems)
	}
	return cty.ObjectVal(attrs)
}

// checkValue finds values the spec cannot hold: unknown values (which
// depend on what apply reports), fractional numbers, and nulls in lists or
// maps. It returns the first problem with its attribute path.
func checkValue(val cty.Value, b schema.Block, prefix string) *diag.Diagnostic {
	for _, a := range b.Attributes {
		if a.Computed {
			continue
		}
		if d := checkAttr(val.GetAttr(a.Name), prefix+a.Name); d != nil {
			return d
		}
	}
	for _, nb := range b.Blocks {
		v := val.GetAttr(nb.Name)
		if v.IsNull() {
			continue
		}
		if nb.Nesting == schema.NestingSingle {
			if d := checkValue(v, nb, prefix+nb.Name+"."); d != nil {
				return d
			}
			continue
		}
		i := 0
		for it := v.ElementIterator(); it.Next(); i++ {
			_, ev := it.Element()
			if d := checkValue(ev, nb, fmt.Sprintf("%s%s[%d].", prefix, nb.Name, i)); d != nil {
				return d
			}
		}
	}
	return nil
}

// The range of numbers a configuration may hold: every numeric attribute
// is an int64 or smaller.
var (
	maxNumber = new(big.Float).SetInt64(math.MaxInt64)
	minNumber = new(big.Float).SetInt64(math.MinInt64)
)

func checkAttr(v cty.Value, path string) *diag.Diagnostic {
	if !v.IsKnown() {
		return &diag.Diagnostic{Severity: diag.Error, Attribute: path, Summary: "Value known only after apply",
			Detail: "this attribute depends on a value gpuslice learns only by applying (such as a workload's node); use a literal or a value known before apply"}
	}
	if v.IsNull() {
		return nil
	}
	ty := v.Type()
	switch {
	case ty == cty.Number:
		// Checked before anything converts the number: 1e99999999 is a
		// valid literal a hundred million digits long.
		if f := v.AsBigFloat(); f.Cmp(maxNumber) > 0 || f.Cmp(minNumber) < 0 {
			return &diag.Diagnostic{Severity: diag.Error, Attribute: path, Summary: "Number out of range",
				Detail: fmt.Sprintf("a number of about 10^%d is too large for this attribute; write a number between %s and %s",
					int(float64(f.MantExp(nil))*math.Log10(2)), minNumber.Text('f', 0), maxNumber.Text('f', 0))}
		}
		if _, acc := v.AsBigFloat().Int(nil); acc != big.Exact {
			return &diag.Diagnostic{Severity: diag.Error, Attribute: path, Summary: "Whole number required",
				Detail: fmt.Sprintf("%s is not a whole number", v.AsBigFloat().Text('g', -1))}
		}
	case ty.IsListType() || ty.IsMapType():
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			var sub string
			if ty.IsMapType() {
				sub = fmt.Sprintf("%s[%q]", path, k.AsString())
			} else {
				idx, _ := k.AsBigFloat().Int64()
				sub = fmt.Sprintf("%s[%d]", path, idx)
			}
			if ev.IsNull() {
				return &diag.Diagnostic{Severity: diag.Error, Attribute: sub, Summary: "Null element", Detail: "remove the element or give it a value"}
			}
			if d := checkAttr(ev, sub); d != nil {
				return d
			}
		}
	}
	return nil
}
