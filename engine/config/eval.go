package config

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

type evaluator struct {
	dir    string
	g      *graph
	models tables.GPUModels
	// prefix is the module path of the resources, "" in the root module.
	prefix string
}

// context builds the evaluation context of a node from the values of the
// nodes it refers to (each is evaluated before it).
func (e *evaluator) context(n *node) *hcl.EvalContext {
	groups := map[string]map[string]cty.Value{}
	for _, r := range n.refs {
		root, name, _ := strings.Cut(r.addr, ".")
		if groups[root] == nil {
			groups[root] = map[string]cty.Value{}
		}
		v := e.g.nodes[r.addr].value
		if v == cty.NilVal {
			v = cty.DynamicVal // its own evaluation failed and was reported
		}
		groups[root][name] = v
	}
	vars := map[string]cty.Value{}
	for root, m := range groups {
		vars[root] = cty.ObjectVal(m)
	}
	wd, _ := os.Getwd()
	vars["path"] = cty.ObjectVal(map[string]cty.Value{
		"module": cty.StringVal(e.dir), "root": cty.StringVal(e.dir), "cwd": cty.StringVal(wd),
	})
	vars["terraform"] = cty.ObjectVal(map[string]cty.Value{"workspace": cty.StringVal("default")})
	return &hcl.EvalContext{Variables: vars, Functions: functions()}
}

func (e *evaluator) expr(n *node, expr hcl.Expression) (cty.Value, diag.Diagnostics) {
	v, hd := expr.Value(e.context(n))
	if hd.HasErrors() {
		return cty.DynamicVal, fromHCL(hd)
	}
	return v, fromHCL(hd)
}

// blockSpec turns a schema block into an hcldec spec. Computed attributes
// are left out: a configuration cannot set them.
func blockSpec(b schema.Block) hcldec.ObjectSpec {
	obj := hcldec.ObjectSpec{}
	for _, a := range b.Attributes {
		if a.Computed {
			continue
		}
		obj[a.Name] = &hcldec.AttrSpec{Name: a.Name, Type: a.Type, Required: a.Required}
	}
	for _, nb := range b.Blocks {
		switch nb.Nesting {
		case schema.NestingSingle:
			obj[nb.Name] = &hcldec.BlockSpec{TypeName: nb.Name, Nested: blockSpec(nb), Required: nb.Required}
		case schema.NestingList:
			obj[nb.Name] = &hcldec.BlockListSpec{TypeName: nb.Name, Nested: blockSpec(nb)}
		}
	}
	return obj
}

// resource decodes a resource block, checks it, converts it to its spec
// type, appends it to the stack and records its value (with computed
// attributes) for the resources and outputs that refer to it.
func (e *evaluator) resource(n *node, stack *spec.Stack) diag.Diagnostics {
	addr := e.prefix + n.addr
	var diags diag.Diagnostics
	for name, attr := range n.body.Attributes {
		if a, ok := n.resource.Attribute(name); ok && a.Computed {
			diags = append(diags, errAt(attr.NameRange, "Read-only attribute", fmt.Sprintf("%s.%s is computed by gpuslice and cannot be set; remove it", addr, name)))
		}
	}
	if diags.HasErrors() {
		n.value = cty.DynamicVal
		return diags
	}
	val, hd := hcldec.Decode(n.body, blockSpec(n.resource.Block), e.context(n))
	diags = append(diags, fromHCL(hd)...)
	if hd.HasErrors() {
		n.value = cty.DynamicVal
		return diags
	}
	val = withDefaults(val, n.resource.Block)
	if d := checkValue(val, n.resource.Block, ""); d != nil {
		d.Address = addr
		r := locate(n.body, n.declRange, d.Attribute)
		d.Range = rangeOf(&r)
		n.value = cty.DynamicVal
		return append(diags, *d)
	}
	data, err := ctyjson.Marshal(val, val.Type())
	if err != nil {
		n.value = cty.DynamicVal
		return append(diags, errAt(n.declRange, "Cannot convert "+addr, err.Error()))
	}
	meta := spec.Meta{Address: addr}
	var target spec.Resource
	switch n.resource.Type {
	case schema.Platform.Type:
		target = &spec.Platform{Meta: meta}
	case schema.Package.Type:
		target = &spec.Package{Meta: meta}
	case schema.Quota.Type:
		target = &spec.Quota{Meta: meta}
	case schema.Workload.Type:
		target = &spec.Workload{Meta: meta}
	}
	if err := json.Unmarshal(data, target); err != nil {
		n.value = cty.DynamicVal
		return append(diags, errAt(n.declRange, "Cannot convert "+addr, err.Error()))
	}
	if err := target.AddTo(stack); err != nil {
		n.value = cty.DynamicVal
		return append(diags, errAt(n.declRange, "More than one gpuslice_platform", err.Error()))
	}
	n.value = withComputed(val, target, n.resource, e.models)
	return diags
}

// withDefaults replaces null attributes with their schema defaults, in
// nested blocks too.
func withDefaults(val cty.Value, b schema.Block) cty.Value {
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
			attrs[nb.Name] = withDefaults(v, nb)
			continue
		}
		var elems []cty.Value
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			elems = append(elems, withDefaults(ev, nb))
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

// withComputed returns the value other expressions see for a resource:
// its arguments plus computed attributes — known ones (a package's memory)
// and unknown ones that only apply can tell (a workload's node).
func withComputed(val cty.Value, target spec.Resource, r schema.Resource, models tables.GPUModels) cty.Value {
	attrs := val.AsValueMap()
	for _, a := range r.Attributes {
		if a.Computed {
			attrs[a.Name] = cty.UnknownVal(a.Type)
		}
	}
	spec.StackOf(target).Resolve(models)
	for name, v := range target.PlannedAttributes() {
		attrs[name] = v
	}
	return cty.ObjectVal(attrs)
}
