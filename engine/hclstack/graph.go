package hclstack

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/schema"
)

type nodeKind int

const (
	kindVariable nodeKind = iota
	kindLocal
	kindResource
	kindOutput
	kindModule
)

// node is one thing that has a value: var.x, local.y,
// gpuslice_package.small or output.z.
type node struct {
	addr      string
	kind      nodeKind
	declRange hcl.Range
	refs      []reference

	variable *variable // kindVariable

	expr hcl.Expression // kindLocal, kindOutput

	resource  schema.Resource // kindResource
	name      string          // resource or output name
	text      text            // kindResource: its block, parsed again to decode it
	variables []hcl.Traversal // kindResource: what its body refers to
	spots     spots           // kindResource, once decoded
	dependsOn []hcl.Traversal

	description string // kindOutput
	sensitive   bool   // kindOutput

	source      string         // kindModule
	sourceRange hcl.Range      // kindModule
	inputs      hcl.Attributes // kindModule

	value cty.Value
}

// reference is one use of another node inside an expression.
type reference struct {
	addr string
	rng  hcl.Range
}

type graph struct {
	nodes     map[string]*node
	variables []*variable
	outputs   []*node
	decl      []*node // declaration order, for stable evaluation
	// referenced holds the addresses some expression of the module refers
	// to: only their values are built.
	referenced map[string]bool
}

var resourceMeta = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "depends_on"}, {Name: "provider"}, {Name: "count"}, {Name: "for_each"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "lifecycle"}, {Type: "provisioner", LabelNames: []string{"type"}}, {Type: "connection"}},
}

var outputSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "value", Required: true}, {Name: "description"}, {Name: "sensitive"}, {Name: "depends_on"},
}}

func buildGraph(f *files) (*graph, diag.Diagnostics) {
	g := &graph{nodes: map[string]*node{}}
	var diags diag.Diagnostics
	for _, d := range f.decls {
		diags = append(diags, d.diags...)
		for _, n := range d.nodes {
			switch n.kind {
			case kindVariable:
				g.variables = append(g.variables, n.variable)
			case kindOutput:
				g.outputs = append(g.outputs, n)
			}
			if prev, dup := g.nodes[n.addr]; dup {
				diags = append(diags, errAt(n.declRange, "Duplicate declaration", fmt.Sprintf("%s is already declared at %s", n.addr, rangeOf(&prev.declRange))))
				continue
			}
			g.nodes[n.addr] = n
			g.decl = append(g.decl, n)
		}
	}
	if diags.HasErrors() {
		return g, diags
	}
	return g, append(diags, g.resolveAll()...)
}

// resolveAll resolves the references of every node and notes what they
// refer to.
func (g *graph) resolveAll() diag.Diagnostics {
	var diags diag.Diagnostics
	g.referenced = map[string]bool{}
	for _, n := range g.decl {
		diags = append(diags, g.resolveRefs(n)...)
		for _, r := range n.refs {
			g.referenced[r.addr] = true
		}
	}
	return diags
}

func dependsOn(attr *hcl.Attribute, diags diag.Diagnostics) ([]hcl.Traversal, diag.Diagnostics) {
	exprs, hd := hcl.ExprList(attr.Expr)
	diags = append(diags, fromHCL(hd)...)
	var out []hcl.Traversal
	for _, e := range exprs {
		t, hd := hcl.AbsTraversalForExpr(e)
		diags = append(diags, fromHCL(hd)...)
		if !hd.HasErrors() {
			out = append(out, t)
		}
	}
	return out, diags
}

// resolveRefs finds the nodes an expression or resource body uses.
func (g *graph) resolveRefs(n *node) diag.Diagnostics {
	var traversals []hcl.Traversal
	switch n.kind {
	case kindLocal, kindOutput:
		traversals = n.expr.Variables()
	case kindResource:
		traversals = append(traversals, n.variables...)
	case kindModule:
		for _, a := range n.inputs {
			traversals = append(traversals, a.Expr.Variables()...)
		}
	}
	traversals = append(traversals, n.dependsOn...)
	var diags diag.Diagnostics
	seen := map[string]bool{}
	for _, t := range traversals {
		addr, d := g.refAddr(t)
		if d != nil {
			diags = append(diags, *d)
			continue
		}
		if addr == "" || seen[addr] {
			continue
		}
		if addr == n.addr {
			diags = append(diags, errAt(t.SourceRange(), "Self-referential "+n.addr, fmt.Sprintf("%s refers to itself", n.addr)))
			continue
		}
		seen[addr] = true
		n.refs = append(n.refs, reference{addr: addr, rng: t.SourceRange()})
	}
	return diags
}

// refAddr maps a traversal to the address of the node it reads, "" for
// built-ins (path.*, terraform.*).
func (g *graph) refAddr(t hcl.Traversal) (string, *diag.Diagnostic) {
	root := t.RootName()
	rng := t.SourceRange()
	attrAt := func(i int) (string, bool) {
		if len(t) <= i {
			return "", false
		}
		if a, ok := t[i].(hcl.TraverseAttr); ok {
			return a.Name, true
		}
		return "", false
	}
	switch root {
	case "path", "terraform":
		return "", nil
	case "module":
		name, ok := attrAt(1)
		if !ok {
			d := errAt(rng, "Invalid reference", "write module.<name>.<output>")
			return "", &d
		}
		addr := "module." + name
		if _, ok := g.nodes[addr]; !ok {
			d := errAt(rng, "Reference to undeclared module", fmt.Sprintf("%s is not declared%s", addr, diag.Suggest(addr, g.addrsWithPrefix("module."))))
			return "", &d
		}
		return addr, nil
	case "var", "local":
		name, ok := attrAt(1)
		if !ok {
			d := errAt(rng, "Invalid reference", fmt.Sprintf("write %s.<name>", root))
			return "", &d
		}
		addr := root + "." + name
		if _, ok := g.nodes[addr]; !ok {
			kind := map[string]string{"var": "input variable", "local": "local value"}[root]
			d := errAt(rng, "Reference to undeclared "+kind, fmt.Sprintf("%s is not declared%s", addr, diag.Suggest(addr, g.addrsWithPrefix(root+"."))))
			return "", &d
		}
		return addr, nil
	}
	if _, ok := schema.ResourceByType(root); ok {
		name, ok := attrAt(1)
		if !ok {
			d := errAt(rng, "Invalid reference", fmt.Sprintf("write %s.<name>.<attribute>", root))
			return "", &d
		}
		addr := root + "." + name
		if _, ok := g.nodes[addr]; !ok {
			d := errAt(rng, "Reference to undeclared resource", fmt.Sprintf("%s is not declared%s", addr, diag.Suggest(addr, g.addrsWithPrefix(root+"."))))
			return "", &d
		}
		return addr, nil
	}
	roots := append([]string{"var", "local", "module", "path", "terraform"}, resourceTypes()...)
	d := errAt(rng, "Unknown reference", fmt.Sprintf("%q is not something an expression can refer to%s; use var.<name>, local.<name>, module.<name>.<output> or <resource type>.<name>.<attribute>", root, diag.Suggest(root, roots)))
	return "", &d
}

func (g *graph) variableNames() []string {
	var out []string
	for _, v := range g.variables {
		out = append(out, v.name)
	}
	return out
}

func (g *graph) addrsWithPrefix(prefix string) []string {
	var out []string
	for a := range g.nodes {
		if strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// order returns the nodes so that each comes after everything it refers
// to, or an error naming a cycle.
func (g *graph) order() ([]*node, diag.Diagnostics) {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var out []*node
	var stack []*node
	var diags diag.Diagnostics
	var visit func(n *node) bool
	visit = func(n *node) bool {
		switch state[n.addr] {
		case done:
			return true
		case visiting:
			var cycle []string
			for i := len(stack) - 1; i >= 0; i-- {
				cycle = append([]string{stack[i].addr}, cycle...)
				if stack[i] == n {
					break
				}
			}
			cycle = append(cycle, n.addr)
			diags = append(diags, errAt(n.declRange, "Cycle in references", strings.Join(cycle, " → ")+": break the cycle by replacing one reference with a literal value"))
			return false
		}
		state[n.addr] = visiting
		stack = append(stack, n)
		for _, r := range n.refs {
			if !visit(g.nodes[r.addr]) {
				return false
			}
		}
		stack = stack[:len(stack)-1]
		state[n.addr] = done
		out = append(out, n)
		return true
	}
	for _, n := range g.decl {
		if state[n.addr] == unvisited && !visit(n) {
			return nil, diags
		}
	}
	return out, diags
}

func sortedAttrs(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].NameRange, out[j].NameRange
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Start.Byte < b.Start.Byte
	})
	return out
}

// bodyVariables returns every traversal used anywhere in a syntax body,
// including nested blocks.
func bodyVariables(body *hclsyntax.Body) []hcl.Traversal {
	var out []hcl.Traversal
	for _, a := range body.Attributes {
		out = append(out, a.Expr.Variables()...)
	}
	for _, b := range body.Blocks {
		out = append(out, bodyVariables(b.Body)...)
	}
	return out
}
