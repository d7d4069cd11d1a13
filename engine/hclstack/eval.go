package hclstack

import (
	"fmt"
	"os"
	"runtime"
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

// decoded is a resource block evaluated: its spec and the value other
// expressions see, or diagnostics (no target) when it cannot be.
type decoded struct {
	target spec.Resource
	value  cty.Value
	diags  diag.Diagnostics
}

// decode decodes a resource block, checks it and converts it to its spec
// type, with its value (with computed attributes) for the resources and
// outputs that refer to it. It reads only the values of the nodes n
// refers to, so resources that do not refer to each other decode at once.
func (e *evaluator) decode(n *node) decoded {
	addr := e.prefix + n.addr
	var d decoded
	body, ds := n.body()
	if ds.HasErrors() {
		d.diags = ds
		return d
	}
	for name, attr := range body.Attributes {
		if a, ok := n.resource.Attribute(name); ok && a.Computed {
			d.diags = append(d.diags, errAt(attr.NameRange, "Read-only attribute", fmt.Sprintf("%s.%s is computed by gpuslice and cannot be set; remove it", addr, name)))
		}
	}
	if d.diags.HasErrors() {
		return d
	}
	val, hd := hcldec.Decode(body, resourceSpec(n.resource), e.context(n))
	d.diags = append(d.diags, fromHCL(hd)...)
	if hd.HasErrors() {
		return d
	}
	val = config.WithDefaults(val, n.resource.Block)
	target, ds := config.Decode(n.resource, addr, val)
	if ds.HasErrors() {
		for _, dg := range ds {
			r := locate(body, n.declRange, dg.Attribute)
			dg.Range = rangeOf(&r)
			d.diags = append(d.diags, dg)
		}
		return d
	}
	d.target, d.value = target, cty.DynamicVal
	if e.g.referenced[n.addr] {
		// What other expressions see; a stack of thousands of workloads
		// that nothing refers to builds none.
		d.value = withComputed(val, target, n.resource, e.models)
	}
	// Decoded, the body is read again only for where it writes each part
	// (Locate); its syntax tree, about 10 KiB for a workload, goes.
	n.spots = spotsOf(body)
	return d
}

// join appends a decoded resource to the stack and records its value.
func (e *evaluator) join(n *node, d decoded, stack *spec.Stack) diag.Diagnostics {
	n.value = cty.DynamicVal
	if d.target == nil {
		return d.diags
	}
	if err := d.target.AddTo(stack); err != nil {
		return append(d.diags, errAt(n.declRange, "More than one gpuslice_platform", err.Error()))
	}
	n.value = d.value
	return d.diags
}

// resources evaluates resource nodes none of which refers to another, on
// every core, and joins them to the stack in their order.
func (e *evaluator) resources(nodes []*node, stack *spec.Stack) diag.Diagnostics {
	out := make([]decoded, len(nodes))
	onEveryCore(len(nodes), func(i int) { out[i] = e.decode(nodes[i]) })
	var diags diag.Diagnostics
	for i, n := range nodes {
		diags = append(diags, e.join(n, out[i], stack)...)
	}
	return diags
}

// onEveryCore runs f for 0..n-1 on as many goroutines as the process may
// run at once, and returns when all have.
func onEveryCore(n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// independent is the longest run of resource nodes at the start of order
// none of which refers to another of the run.
func independent(order []*node) []*node {
	in := map[string]bool{}
	for i, n := range order {
		if n.kind != kindResource {
			return order[:i]
		}
		for _, r := range n.refs {
			if in[r.addr] {
				return order[:i]
			}
		}
		in[n.addr] = true
	}
	return order
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
