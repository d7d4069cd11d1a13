// Package hclstack is the gpuslice CLI's front end: it reads a directory
// of .tf files — the same `resource "gpuslice_…"` blocks the Terraform
// provider accepts — evaluates the subset of Terraform they need, in
// dependency order, and produces one validated spec.Stack. Every
// diagnostic carries file:line:column. Only the CLI uses it; the provider
// gets its values from Terraform and decodes them with engine/config, as
// this package does once a resource's expressions are evaluated.
//
// Supported: resource blocks of the four gpuslice types with depends_on;
// variable blocks (type constraints with optional attributes and their
// defaults, default, description, sensitive, nullable, validation) set by
// -var, -var-file, terraform.tfvars, *.auto.tfvars and TF_VAR_ variables
// with Terraform's precedence; locals; output blocks (re-evaluated with
// what apply learned); local modules ("./…", "../…") with inputs and
// outputs; references between all of these; path.module, path.root,
// path.cwd and terraform.workspace ("default"); Terraform's everyday
// functions from go-cty's standard library (string, numeric, collection,
// encoding, date and to<type> conversions). terraform and provider blocks
// are accepted and ignored, so the same files work with Terraform and
// OpenTofu.
//
// Refused, each with a diagnostic at its position: data sources (read by
// the provider only), resources of other providers, count and for_each on
// resources and modules, module version and sources that are not local,
// lifecycle, provisioner and connection blocks. dynamic blocks and
// functions outside the list above (file, templatefile, provider-defined
// ones) fail as HCL reports them: unsupported block type, unknown
// function. Configurations that need any of these apply with terraform or
// tofu. Nothing is read from a state file: what exists is what the
// cluster's inventory says.
package hclstack

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/schema"
)

// topLevel lists the blocks a configuration file may contain. terraform and
// provider blocks are accepted so the same files work with Terraform and
// OpenTofu; the CLI does not need them.
var topLevel = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "resource", LabelNames: []string{"type", "name"}},
	{Type: "variable", LabelNames: []string{"name"}},
	{Type: "locals"},
	{Type: "output", LabelNames: []string{"name"}},
	{Type: "terraform"},
	{Type: "provider", LabelNames: []string{"name"}},
	{Type: "data", LabelNames: []string{"type", "name"}},
	{Type: "module", LabelNames: []string{"name"}},
}}

// files holds what the configuration files of one directory declare.
type files struct {
	parser *hclparse.Parser
	decls  []decl
}

// parseDir parses every *.tf file in dir, in name order, and reads what
// each declares.
func parseDir(dir string) (*files, diag.Diagnostics) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, diag.Diagnostics{{Severity: diag.Error, Summary: "Cannot read configuration directory", Detail: err.Error()}}
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".tf") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, diag.Diagnostics{{Severity: diag.Error, Summary: "No configuration files",
			Detail: "no *.tf files in " + dir + "; write resource \"gpuslice_…\" blocks in a .tf file there or pass the directory that holds them"}}
	}
	f := &files{parser: hclparse.NewParser()}
	var diags diag.Diagnostics
	for _, n := range names {
		path := filepath.Join(dir, n)
		src, err := os.ReadFile(path)
		if err != nil {
			diags = append(diags, diag.Diagnostic{Severity: diag.Error, Summary: "Failed to read file",
				Detail: fmt.Sprintf("The configuration file %q could not be read: %v.", path, err)})
			continue
		}
		decls, hd := parseFile(src, path, func(body *hclsyntax.Body) []decl { return declare(body, src) })
		diags = append(diags, fromHCL(hd)...)
		for _, d := range decls {
			f.decls = append(f.decls, d...)
		}
	}
	return f, diags
}

// fromHCL converts HCL diagnostics, keeping the position.
func fromHCL(hd hcl.Diagnostics) diag.Diagnostics {
	var out diag.Diagnostics
	for _, d := range hd {
		sev := diag.Error
		if d.Severity == hcl.DiagWarning {
			sev = diag.Warning
		}
		out = append(out, diag.Diagnostic{Severity: sev, Summary: d.Summary, Detail: d.Detail, Range: rangeOf(d.Subject)})
	}
	return out
}

func rangeOf(r *hcl.Range) *diag.Range {
	if r == nil {
		return nil
	}
	return &diag.Range{Filename: r.Filename, Line: r.Start.Line, Column: r.Start.Column}
}

func errAt(r hcl.Range, summary, detail string) diag.Diagnostic {
	return diag.Diagnostic{Severity: diag.Error, Summary: summary, Detail: detail, Range: rangeOf(&r)}
}

// resourceTypes lists the resource type names, for suggestions.
func resourceTypes() []string {
	var names []string
	for _, r := range schema.Resources() {
		names = append(names, r.Type)
	}
	return names
}
