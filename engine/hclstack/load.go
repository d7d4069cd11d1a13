package hclstack

import (
	"fmt"
	"path/filepath"
	"regexp"
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

	root *module
	// resources by full address (module.<name>. prefixes included), for
	// Locate.
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
// resources, modules and outputs in dependency order, validates the
// resulting stack and returns it. Diagnostics carry file:line:column; on
// errors the Config may be partial.
func Load(dir string, opts Options) (*Config, diag.Diagnostics) {
	if opts.GPUModels == nil {
		opts.GPUModels = tables.BuiltinGPUModels()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, diag.Diagnostics{{Severity: diag.Error, Summary: "Invalid configuration directory", Detail: err.Error()}}
	}
	stackName, d := StackName(opts.Stack, abs)
	if d != nil {
		return nil, diag.Diagnostics{*d}
	}
	f, diags := parseDir(dir)
	if f == nil || diags.HasErrors() {
		return nil, diags
	}
	g, ds := buildGraph(f)
	diags = append(diags, ds...)
	if ds.HasErrors() {
		return nil, diags
	}
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
		// Like Terraform: TF_VAR_ variables are shared by every
		// configuration a shell works with; one not declared here is not news.
		if strings.HasPrefix(rv.source, "environment variable ") {
			continue
		}
		d := diag.Diagnostic{Summary: "Value for undeclared variable", Detail: fmt.Sprintf("%s sets %q, which no variable block declares%s", rv.source, name, diag.Suggest(name, g.variableNames()))}
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

	c := &Config{Dir: dir, models: opts.GPUModels, resources: map[string]*node{}}
	stack := &spec.Stack{Name: stackName}
	c.root = &module{absDir: abs, graph: g, children: map[string]*module{}}
	ds = c.root.eval(c, raw, stack, 0)
	diags = append(diags, ds...)
	if ds.HasErrors() && c.root.outputs == nil {
		return nil, diags
	}
	c.Outputs = c.root.outputs
	c.Stack = stack
	if diags.HasErrors() {
		return c, diags
	}
	stack.Resolve(opts.GPUModels)
	for _, d := range spec.Validate(stack, opts.GPUModels) {
		diags = append(diags, c.Locate(d))
	}
	c.compact()
	return c, diags
}

// StackName returns the given stack name, checked, or one derived from the
// directory's name ("My_Stack" → "my-stack"), as Load names the stack.
func StackName(given, dir string) (string, *diag.Diagnostic) {
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
	r := n.where().find(n.declRange, d.Attribute)
	d.Range = rangeOf(&r)
	return d
}

// compact lets go of what evaluating the configuration needed once it is
// evaluated: the graph, the syntax trees, the expressions and every
// resource's value. A plan of thousands of resources then holds their
// specs and, for Locate, where each resource writes its attributes. A
// configuration with outputs keeps it all, to evaluate its outputs again
// with what apply learns.
func (c *Config) compact() {
	if len(c.Outputs) > 0 {
		return
	}
	c.root = nil
	for addr, n := range c.resources {
		c.resources[addr] = &node{addr: n.addr, kind: n.kind, declRange: n.declRange, spots: n.where()}
	}
}

// where is where a resource writes each part: found when it was decoded,
// or now for one that was not (evaluation stopped before it).
func (n *node) where() spots {
	if n.spots != nil || n.text.src == nil {
		return n.spots
	}
	body, ds := n.body()
	if ds.HasErrors() {
		return nil
	}
	return spotsOf(body)
}

// bodyOf returns the syntax body of an hcl.Body from a .tf file.
func bodyOf(b hcl.Body) *hclsyntax.Body {
	body, _ := b.(*hclsyntax.Body)
	return body
}
