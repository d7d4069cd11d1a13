package hclstack

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/config"
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

// resourceSpecs are the specs of the resource types, made once: a
// configuration of a thousand workloads decodes them all with one.
var resourceSpecs sync.Map // type → hcldec.ObjectSpec

func resourceSpec(r schema.Resource) hcldec.ObjectSpec {
	if s, ok := resourceSpecs.Load(r.Type); ok {
		return s.(hcldec.ObjectSpec)
	}
	s, _ := resourceSpecs.LoadOrStore(r.Type, blockSpec(r.Block))
	return s.(hcldec.ObjectSpec)
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
	val, hd := hcldec.Decode(n.body, resourceSpec(n.resource), e.context(n))
	diags = append(diags, fromHCL(hd)...)
	if hd.HasErrors() {
		n.value = cty.DynamicVal
		return diags
	}
	val = config.WithDefaults(val, n.resource.Block)
	target, ds := config.Decode(n.resource, addr, val)
	if ds.HasErrors() {
		for _, d := range ds {
			r := locate(n.body, n.declRange, d.Attribute)
			d.Range = rangeOf(&r)
			diags = append(diags, d)
		}
		n.value = cty.DynamicVal
		return diags
	}
	if err := target.AddTo(stack); err != nil {
		n.value = cty.DynamicVal
		return append(diags, errAt(n.declRange, "More than one gpuslice_platform", err.Error()))
	}
	n.value = withComputed(val, target, n.resource, e.models)
	return diags
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
