// Package schema declares the attributes of every gpuslice resource once.
// The HCL front end decodes and checks configurations with it, and the
// Terraform provider builds its schema from it, so `gpuslice plan` and
// `terraform plan` accept exactly the same blocks.
package schema

import (
	"sort"

	"github.com/zclconf/go-cty/cty"
)

// Attribute is one argument of a resource or block.
type Attribute struct {
	Name        string
	Type        cty.Type
	Description string
	Required    bool
	// Computed attributes are set by gpuslice and cannot be written.
	Computed bool
	// Inferred arguments may be left out: gpuslice then infers them from
	// the others (a package's memory from its fraction). Optional and
	// computed in Terraform terms; with no default, so a configuration
	// written before the argument existed plans without a change.
	Inferred bool
	// Default applies when the attribute is left out (the attribute is then
	// optional and computed in Terraform terms).
	Default cty.Value
	// ForceNew marks identity fields: changing one replaces the resource.
	ForceNew bool
	// OneOf lists the only values a string attribute accepts (the provider
	// turns it into a validator; spec.Validate checks the same).
	OneOf []string
}

// Optional reports whether a configuration may leave the attribute out.
func (a Attribute) Optional() bool { return !a.Required && !a.Computed }

// Nesting says how often a nested block may appear.
type Nesting int

const (
	// NestingSingle is a block that appears at most once.
	NestingSingle Nesting = iota
	// NestingList is a block that may repeat; order matters.
	NestingList
)

// Block is a set of attributes and nested blocks.
type Block struct {
	Name        string
	Description string
	Nesting     Nesting
	Required    bool // a single block that must be present
	Attributes  []Attribute
	Blocks      []Block
}

// Attribute returns the named attribute, or false.
func (b Block) Attribute(name string) (Attribute, bool) {
	for _, a := range b.Attributes {
		if a.Name == name {
			return a, true
		}
	}
	return Attribute{}, false
}

// NestedBlock returns the named nested block, or false.
func (b Block) NestedBlock(name string) (Block, bool) {
	for _, nb := range b.Blocks {
		if nb.Name == name {
			return nb, true
		}
	}
	return Block{}, false
}

// Names lists the attribute and block names, sorted, for suggestions.
func (b Block) Names() []string {
	var names []string
	for _, a := range b.Attributes {
		if !a.Computed {
			names = append(names, a.Name)
		}
	}
	for _, nb := range b.Blocks {
		names = append(names, nb.Name)
	}
	sort.Strings(names)
	return names
}

// Resource is a resource type such as gpuslice_package.
type Resource struct {
	Type        string
	Description string
	// ImportID documents the import identifier, e.g. "<namespace>/<name>".
	ImportID string
	// Identity names the attributes the import ID joins with "/", in
	// order: the resource identity of Terraform 1.12+.
	Identity []string
	// Waits is set when apply waits for the resource (wait_for, timeout):
	// the provider gives it a timeouts block.
	Waits bool
	Block
}

// Resources lists every resource type in the order they are applied.
func Resources() []Resource { return []Resource{Platform, Package, Quota, Workload} }

// ResourceByType returns the resource type named typ, or false.
func ResourceByType(typ string) (Resource, bool) {
	for _, r := range Resources() {
		if r.Type == typ {
			return r, true
		}
	}
	return Resource{}, false
}

func str(name, desc string) Attribute {
	return Attribute{Name: name, Type: cty.String, Description: desc}
}

func strDefault(name, def, desc string) Attribute {
	return Attribute{Name: name, Type: cty.String, Description: desc, Default: cty.StringVal(def)}
}

func required(a Attribute) Attribute { a.Required = true; return a }
func forceNew(a Attribute) Attribute { a.ForceNew = true; return a }
func computed(a Attribute) Attribute { a.Computed = true; return a }
func inferred(a Attribute) Attribute { a.Inferred = true; return a }

func oneOf(a Attribute, values ...string) Attribute { a.OneOf = values; return a }
