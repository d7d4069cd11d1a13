// Package config decodes the attribute values of one gpuslice resource —
// an object of its schema block's type, as the Terraform provider receives
// it and as the CLI's HCL evaluator (engine/hclstack) produces it — into its
// spec type, with the schema's defaults and the checks every value must
// pass (known before apply, whole numbers within int64, no null elements).
// Both front ends share it, so a .tf file and a Terraform plan decode to the
// same spec. It evaluates no expressions and reads no files.
package config

import (
	"errors"
	"reflect"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// DecodeResource converts the attribute values of one resource — an object
// of its schema block's type, as the Terraform provider receives it — to
// its spec type (*spec.Platform, *spec.Package, *spec.Quota or
// *spec.Workload) with the same defaults and value checks as a .tf file
// read by the CLI. Computed attributes and attributes the schema does not
// declare (such as a provider's timeouts block) are ignored. Unknown values
// are an error: callers check IsWhollyKnown first when unknowns are
// expected. Validation of the result (spec.Validate) is left to the caller,
// which knows what else exists in the cluster.
func DecodeResource(r schema.Resource, address string, val cty.Value) (spec.Resource, diag.Diagnostics) {
	if val.IsNull() || !val.Type().IsObjectType() {
		return nil, diag.Diagnostics{diag.Errorf(address, "", "Missing configuration", "%s has no attribute values", address)}
	}
	return Decode(r, address, WithDefaults(argumentsOnly(val, r.Block), r.Block))
}

// Decode converts arguments — an object of BlockType(r.Block) with the
// defaults filled in (WithDefaults) — to the resource's spec type at
// address. A value the spec cannot hold is an error on its attribute path.
func Decode(r schema.Resource, address string, args cty.Value) (spec.Resource, diag.Diagnostics) {
	if d := checkValue(args, r.Block, ""); d != nil {
		d.Address = address
		return nil, diag.Diagnostics{*d}
	}
	meta := spec.Meta{Address: address}
	var target spec.Resource
	switch r.Type {
	case schema.Platform.Type:
		target = &spec.Platform{Meta: meta}
	case schema.Package.Type:
		target = &spec.Package{Meta: meta}
	case schema.Quota.Type:
		target = &spec.Quota{Meta: meta}
	case schema.Workload.Type:
		target = &spec.Workload{Meta: meta}
	default:
		return nil, diag.Diagnostics{diag.Errorf(address, "", "Unknown resource type", "%s is not a gpuslice resource type", r.Type)}
	}
	if err := fill(args, reflect.ValueOf(target), ""); err != nil {
		var fe *fillError
		if errors.As(err, &fe) {
			return nil, diag.Diagnostics{diag.Errorf(address, fe.path, fe.summary, "%s", fe.detail)}
		}
		return nil, diag.Diagnostics{diag.Errorf(address, "", "Cannot convert "+address, "%v", err)}
	}
	return target, nil
}

// argumentsOnly keeps the attributes and blocks a configuration may set,
// in nested blocks too, so the value has exactly the type Load decodes.
func argumentsOnly(val cty.Value, b schema.Block) cty.Value {
	if val.IsNull() || !val.IsKnown() {
		return val
	}
	out := map[string]cty.Value{}
	for _, a := range b.Attributes {
		if a.Computed {
			continue
		}
		if val.Type().HasAttribute(a.Name) {
			out[a.Name] = val.GetAttr(a.Name)
		} else {
			out[a.Name] = cty.NullVal(a.Type)
		}
	}
	for _, nb := range b.Blocks {
		v := cty.NullVal(cty.DynamicPseudoType)
		if val.Type().HasAttribute(nb.Name) {
			v = val.GetAttr(nb.Name)
		}
		switch {
		case nb.Nesting == schema.NestingSingle:
			if v.IsNull() {
				out[nb.Name] = cty.NullVal(BlockType(nb))
			} else {
				out[nb.Name] = argumentsOnly(v, nb)
			}
		case v.IsNull() || !v.IsKnown() || v.LengthInt() == 0:
			out[nb.Name] = cty.ListValEmpty(BlockType(nb))
		default:
			var elems []cty.Value
			for it := v.ElementIterator(); it.Next(); {
				_, ev := it.Element()
				elems = append(elems, argumentsOnly(ev, nb))
			}
			out[nb.Name] = cty.ListVal(elems)
		}
	}
	return cty.ObjectVal(out)
}

// BlockType is the object type of a block's arguments (computed attributes
// left out), the type DecodeResource works on.
func BlockType(b schema.Block) cty.Type {
	attrs := map[string]cty.Type{}
	for _, a := range b.Attributes {
		if !a.Computed {
			attrs[a.Name] = a.Type
		}
	}
	for _, nb := range b.Blocks {
		if nb.Nesting == schema.NestingList {
			attrs[nb.Name] = cty.List(BlockType(nb))
		} else {
			attrs[nb.Name] = BlockType(nb)
		}
	}
	return cty.Object(attrs)
}
