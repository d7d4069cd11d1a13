package hclstack

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// maxModuleDepth stops a module that calls itself.
const maxModuleDepth = 10

// module is one directory of the configuration: the root, or a local
// module called from it. Its resources join the one stack, under addresses
// prefixed like Terraform's (module.ollama.gpuslice_workload.llm).
type module struct {
	absDir   string
	prefix   string
	graph    *graph
	children map[string]*module
	outputs  []Output
}

var moduleMeta = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "source", Required: true}, {Name: "version"}, {Name: "count"}, {Name: "for_each"}, {Name: "providers"}, {Name: "depends_on"},
}}

// moduleNode reads a module block: its source and its inputs.
func moduleNode(block *hcl.Block) (*node, diag.Diagnostics) {
	meta, rest, hd := block.Body.PartialContent(moduleMeta)
	diags := fromHCL(hd)
	if hd.HasErrors() {
		return nil, diags
	}
	n := &node{addr: "module." + block.Labels[0], kind: kindModule, name: block.Labels[0], declRange: block.DefRange}
	src := meta.Attributes["source"]
	v, hd := src.Expr.Value(nil)
	if hd.HasErrors() || v.Type() != cty.String || v.IsNull() {
		return nil, append(diags, errAt(src.Expr.Range(), "Invalid module source", "source must be a literal string such as \"../modules/llm-on-slice\""))
	}
	n.source, n.sourceRange = v.AsString(), src.Expr.Range()
	if !strings.HasPrefix(n.source, "./") && !strings.HasPrefix(n.source, "../") {
		diags = append(diags, errAt(n.sourceRange, "Only local modules",
			fmt.Sprintf("%q: the gpuslice CLI reads modules from local paths (\"./…\" or \"../…\"); apply configurations using registry or Git modules with terraform or tofu", n.source)))
	}
	for _, a := range []string{"version", "count", "for_each"} {
		if attr, ok := meta.Attributes[a]; ok {
			diags = append(diags, errAt(attr.NameRange, "Unsupported module argument",
				fmt.Sprintf("%s is not supported by the gpuslice CLI in module blocks; call the module once per instance, or apply with terraform or tofu", a)))
		}
	}
	if attr, ok := meta.Attributes["depends_on"]; ok {
		n.dependsOn, diags = dependsOn(attr, diags)
	}
	n.inputs, hd = rest.JustAttributes()
	diags = append(diags, fromHCL(hd)...)
	return n, diags
}

// eval evaluates the module's nodes in dependency order into the stack.
func (m *module) eval(c *Config, raw map[string]rawValue, stack *spec.Stack, depth int) diag.Diagnostics {
	order, diags := m.graph.order()
	if diags.HasErrors() {
		return diags
	}
	ev := &evaluator{dir: m.absDir, g: m.graph, models: c.models, prefix: m.prefix}
	for i := 0; i < len(order); i++ {
		n := order[i]
		switch n.kind {
		case kindVariable:
			var rv *rawValue
			if r, ok := raw[n.variable.name]; ok {
				rv = &r
			}
			val, ds := n.variable.resolve(rv)
			diags = append(diags, ds...)
			if ds.HasErrors() {
				n.value = cty.DynamicVal
				continue
			}
			diags = append(diags, n.variable.validate(val)...)
			n.value = val
		case kindLocal, kindOutput:
			val, ds := ev.expr(n, n.expr)
			diags = append(diags, ds...)
			n.value = val
		case kindResource:
			batch := independent(order[i:])
			diags = append(diags, ev.resources(batch, stack)...)
			for _, r := range batch {
				c.resources[m.prefix+r.addr] = r
			}
			i += len(batch) - 1
		case kindModule:
			diags = append(diags, m.call(c, ev, n, stack, depth)...)
		}
	}
	m.collectOutputs()
	return diags
}

// call evaluates a module block: its inputs here, then the module's own
// directory with them as its variables.
func (m *module) call(c *Config, ev *evaluator, n *node, stack *spec.Stack, depth int) diag.Diagnostics {
	n.value = cty.DynamicVal
	if depth+1 >= maxModuleDepth {
		return diag.Diagnostics{errAt(n.declRange, "Modules nested too deep", fmt.Sprintf("more than %d levels of modules: does %s call itself?", maxModuleDepth, n.addr))}
	}
	dir := filepath.Join(m.absDir, n.source)
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return diag.Diagnostics{errAt(n.sourceRange, "Module not found", fmt.Sprintf("%s is not a directory (source is relative to %s)", dir, m.absDir))}
	}
	f, diags := parseDir(displayPath(dir))
	if f == nil || diags.HasErrors() {
		return diags
	}
	g, ds := buildGraph(f)
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return diags
	}
	raw := map[string]rawValue{}
	for _, a := range sortedAttrs(n.inputs) {
		if _, ok := g.nodes["var."+a.Name]; !ok {
			diags = append(diags, errAt(a.NameRange, "Unsupported module input",
				fmt.Sprintf("module %q (%s) has no variable %q%s", n.name, n.source, a.Name, diag.Suggest(a.Name, g.variableNames()))))
			continue
		}
		v, ds := ev.expr(n, a.Expr)
		diags = append(diags, ds...)
		rng := a.NameRange
		raw[a.Name] = rawValue{source: fmt.Sprintf("%s input %s", n.addr, a.Name), value: &v, rng: &rng}
	}
	child := &module{absDir: dir, prefix: m.prefix + n.addr + ".", graph: g, children: map[string]*module{}}
	m.children[n.name] = child
	diags = append(diags, child.eval(c, raw, stack, depth+1)...)
	n.value = child.outputsValue()
	return diags
}

func (m *module) collectOutputs() {
	m.outputs = []Output{}
	for _, n := range m.graph.outputs {
		m.outputs = append(m.outputs, Output{Name: n.name, Description: n.description, Sensitive: n.sensitive, Value: n.value})
	}
	sort.Slice(m.outputs, func(i, j int) bool { return m.outputs[i].Name < m.outputs[j].Name })
}

// outputsValue is how the calling module sees this one: module.<name>.<output>.
func (m *module) outputsValue() cty.Value {
	vals := map[string]cty.Value{}
	for _, o := range m.outputs {
		vals[o.Name] = o.Value
	}
	return cty.ObjectVal(vals)
}

// evalOutputs evaluates outputs again with what apply learned, module by
// module.
func (m *module) evalOutputs(c *Config, known map[string]map[string]string) diag.Diagnostics {
	for addr, attrs := range known {
		local, ok := strings.CutPrefix(addr, m.prefix)
		if !ok {
			continue
		}
		n, ok := m.graph.nodes[local]
		if !ok || n.kind != kindResource || n.value == cty.NilVal || !n.value.Type().IsObjectType() {
			continue
		}
		vals := n.value.AsValueMap()
		for name, v := range attrs {
			if old, ok := vals[name]; ok && !old.IsKnown() {
				vals[name] = cty.StringVal(v)
			}
		}
		n.value = cty.ObjectVal(vals)
	}
	order, diags := m.graph.order()
	if diags.HasErrors() {
		return diags
	}
	ev := &evaluator{dir: m.absDir, g: m.graph, models: c.models, prefix: m.prefix}
	for _, n := range order {
		switch n.kind {
		case kindLocal, kindOutput:
			v, ds := ev.expr(n, n.expr)
			diags = append(diags, ds...)
			n.value = v
		case kindModule:
			if child, ok := m.children[n.name]; ok {
				diags = append(diags, child.evalOutputs(c, known)...)
				n.value = child.outputsValue()
			}
		}
	}
	m.collectOutputs()
	return diags
}

// displayPath is dir relative to the working directory when it is below
// it, so diagnostics name files the way the user wrote them.
func displayPath(dir string) string {
	wd, err := os.Getwd()
	if err != nil {
		return dir
	}
	if rel, err := filepath.Rel(wd, dir); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return dir
}
