package provider

import (
	"encoding/json"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/gpuslice/gpuslice/engine/config"
	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// specArguments is the arguments value (config.BlockType) of a spec read
// back from the cluster: what a configuration would say to get it. Empty
// strings, zero numbers and empty collections of attributes with no
// default read as null, as an unset argument is.
func specArguments(def engineschema.Resource, target spec.Resource) (cty.Value, error) {
	data, err := json.Marshal(target)
	if err != nil {
		return cty.NilVal, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return cty.NilVal, err
	}
	for _, a := range def.Attributes {
		if a.Computed {
			delete(fields, a.Name)
		}
	}
	data, err = json.Marshal(fields)
	if err != nil {
		return cty.NilVal, err
	}
	v, err := ctyjson.Unmarshal(data, config.BlockType(def.Block))
	if err != nil {
		return cty.NilVal, fmt.Errorf("convert %s back to attributes: %w", def.Type, err)
	}
	return unsetZeros(v, def.Block), nil
}

func unsetZeros(v cty.Value, b engineschema.Block) cty.Value {
	if v.IsNull() || !v.IsKnown() {
		return v
	}
	attrs := v.AsValueMap()
	for _, a := range b.Attributes {
		if a.Computed || a.Required || a.Default != cty.NilVal {
			continue
		}
		av := attrs[a.Name]
		if av.IsNull() {
			continue
		}
		ty := av.Type()
		switch {
		case ty == cty.String && av.AsString() == "",
			ty == cty.Number && av.AsBigFloat().Sign() == 0,
			(ty.IsListType() || ty.IsMapType()) && av.LengthInt() == 0:
			attrs[a.Name] = cty.NullVal(ty)
		}
	}
	for _, nb := range b.Blocks {
		bv := attrs[nb.Name]
		switch {
		case nb.Nesting == engineschema.NestingSingle:
			attrs[nb.Name] = unsetZeros(bv, nb)
		case bv.IsNull() || bv.LengthInt() == 0:
			attrs[nb.Name] = cty.ListValEmpty(config.BlockType(nb))
		default:
			var elems []cty.Value
			for it := bv.ElementIterator(); it.Next(); {
				_, ev := it.Element()
				elems = append(elems, unsetZeros(ev, nb))
			}
			attrs[nb.Name] = cty.ListVal(elems)
		}
	}
	return cty.ObjectVal(attrs)
}

// argumentsKnown reports whether every argument of v (computed attributes
// aside) is known: only then can the engine check and plan it.
func argumentsKnown(v cty.Value, b engineschema.Block) bool {
	if !v.IsKnown() {
		return false
	}
	if v.IsNull() {
		return true
	}
	for _, a := range b.Attributes {
		if !a.Computed && v.Type().HasAttribute(a.Name) && !v.GetAttr(a.Name).IsWhollyKnown() {
			return false
		}
	}
	for _, nb := range b.Blocks {
		if !v.Type().HasAttribute(nb.Name) {
			continue
		}
		bv := v.GetAttr(nb.Name)
		if !bv.IsKnown() {
			return false
		}
		if bv.IsNull() {
			continue
		}
		if nb.Nesting == engineschema.NestingSingle {
			if !argumentsKnown(bv, nb) {
				return false
			}
			continue
		}
		for it := bv.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			if !argumentsKnown(ev, nb) {
				return false
			}
		}
	}
	return true
}
