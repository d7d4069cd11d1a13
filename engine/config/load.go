package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// Options configure Load.
type Options struct {
	// Stack names the stack (the inventory of what it applied). Empty means
	// the directory's base name.
	Stack string
	VarOptions
	// GPUModels is the GPU model table; nil means the built-in one.
	GPUModels tables.GPUModels
}

// Config is a loaded configuration.
type Config struct {
	Dir   string
	Stack *spec.Stack
	// Outputs in name order, evaluated with what is known before apply.
	Outputs []Output

	absDir    string
	graph     *graph
	resources map[string]*node
	models    tables.GPUModels
}

// Output is a declared output value.
type Output struct {
	Name        string
	Description string
	Sensitive   bool
	// Value is unknown (cty.UnknownVal) where it depends on what apply
	// reports, such as a workload's node.
	Value cty.Value
}

// Load reads the *.tf files in dir, resolves variables, evaluates locals,
// resources and outputs in dependency order, validates the resulting stack
// and returns it. Diagnostics carry file:line:column; on errors the Config
// may be partial.
func Load(dir string, opts Options) (*Config, diag.Diagnostics) {
	if opts.GPUModels == nil {
		opts.GPUModels = tables.BuiltinGPUModels()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, diag.Diagnostics{{Severity: diag.Error, Summary: "Invalid configuration directory", Detail: err.Error()}}
	}
	stackName, d := stackName(opts.Stack, abs)
	if d != nil {
		return nil, diag.Diagnostics{*d}
	}
	f, diags := parseDir(dir)
	if f == nil || diags.HasErrors() {
		return nil, diags
	}
	c := &Config{Dir: dir, absDir: abs, models: opts.GPUModels, resources: map[string]*node{}}
	g, ds := buildGraph(f)
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return nil, diags
	}
	c.graph = g

	raw, ds := collectValues(dir, opts.VarOptions, func(path string) (hcl.Attributes, diag.Diagnostics) {
		file, hd := f.parser.ParseHCLFile(path)
		if hd.HasErrors() {
			return nil, fromHCL(hd)
		}
		attrs, hd := file.Body.JustAttributes()
		return attrs, fromHCL(hd)
	})
	diags = append(diags, ds...)
	for name, rv := range raw {
		if _, ok := g.nodes["var."+name]; ok {
			continue
		}
		var declared []string
		for _, v := range g.variables {
			declared = append(declared, v.name)
		}
		d := diag.Diagnostic{Summary: "Value for undeclared variable", Detail: fmt.Sprintf("%s sets %q, which no variable block declares%s", rv.source, name, diag.Suggest(name, declared))}
		if rv.text != nil && rv.source == "-var "+name {
			d.Severity = diag.Error
		} else {
			d.Severity = diag.Warning // like Terraform: a shared tfvars file may set more
		}
		if rv.rng != nil {
			d.Range = rangeOf(rv.rng)
		}
		diags = append(diags, d)
	}

	order, ds := g.order()
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return nil, diags
	}
	stack := &spec.Stack{Name: stackName}
	ev := &evaluator{dir: abs, g: g, models: opts.GPUModels}
	for _, n := range order {
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
			ds := ev.resource(n, stack)
			diags = append(diags, ds...)
			c.resources[n.addr] = n
		}
	}
	for _, n := range g.outputs {
		c.Outputs = append(c.Outputs, Output{Name: n.name, Description: n.description, Sensitive: n.sensitive, Value: n.value})
	}
	sort.Slice(c.Outputs, func(i, j int) bool { return c.Outputs[i].Name < c.Outputs[j].Name })
	c.Stack = stack
	if diags.HasErrors() {
		return c, diags
	}
	stack.Resolve(opts.GPUModels)
	for _, d := range spec.Validate(stack, opts.GPUModels) {
		diags = append(diags, c.Locate(d))
	}
	return c, diags
}

// stackName returns the given stack name, checked, or one derived from the
// directory name ("My_Stack" → "my-stack").
func stackName(given, dir string) (string, *diag.Diagnostic) {
	name := given
	if name == "" {
		name = strings.Trim(invalidStackChars.ReplaceAllString(strings.ToLower(filepath.Base(dir)), "-"), "-")
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 || len(name) > 40 {
		return "", &diag.Diagnostic{Severity: diag.Error, Summary: "Invalid stack name",
			Detail: fmt.Sprintf("%q cannot name a stack (lowercase letters, digits and '-', at most 40 characters); pass --stack with such a name", name)}
	}
	return name, nil
}

var invalidStackChars = regexp.MustCompile(`[^a-z0-9-]+`)

// Locate fills in the file position of a diagnostic about a resource
// attribute (from validation or plan-time checks), pointing at the
// attribute's value, or at the resource block when the attribute is not
// written out.
func (c *Config) Locate(d diag.Diagnostic) diag.Diagnostic {
	if d.Range != nil || d.Address == "" {
		return d
	}
	n, ok := c.resources[d.Address]
	if !ok {
		return d
	}
	r := locate(n.body, n.declRange, d.Attribute)
	d.Range = rangeOf(&r)
	return d
}

// bodyOf returns the syntax body of an hcl.Body from a .tf file.
func bodyOf(b hcl.Body) *hclsyntax.Body {
	body, _ := b.(*hclsyntax.Body)
	return body
}
