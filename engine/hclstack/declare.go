package hclstack

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/schema"
)

// decl is what one top-level block of a file declares: its nodes, and the
// diagnostics found reading it, in the order buildGraph reports them.
type decl struct {
	diags diag.Diagnostics
	nodes []*node
}

// declare reads the blocks of a body parsed from src, the whole file: a
// resource keeps where its block is written, not its syntax tree, so that
// a file of thousands of resources does not hold every tree at once
// (about 10 KiB of tree for a workload of 500 bytes) while it is parsed.
func declare(body *hclsyntax.Body, src []byte) []decl {
	content, hd := body.Content(topLevel)
	out := []decl{{diags: fromHCL(hd)}}
	for _, block := range content.Blocks {
		out = append(out, declareBlock(block, src))
	}
	return out
}

func declareBlock(block *hcl.Block, src []byte) decl {
	var d decl
	switch block.Type {
	case "variable":
		v, ds := decodeVariable(block)
		d.diags = ds
		if v != nil {
			d.nodes = []*node{{addr: "var." + v.name, kind: kindVariable, declRange: block.DefRange, variable: v}}
		}
	case "locals":
		attrs, hd := block.Body.JustAttributes()
		d.diags = fromHCL(hd)
		for _, a := range sortedAttrs(attrs) {
			d.nodes = append(d.nodes, &node{addr: "local." + a.Name, kind: kindLocal, declRange: a.NameRange, expr: a.Expr})
		}
	case "output":
		oc, hd := block.Body.Content(outputSchema)
		d.diags = fromHCL(hd)
		if hd.HasErrors() {
			return d
		}
		n := &node{addr: "output." + block.Labels[0], kind: kindOutput, name: block.Labels[0], declRange: block.DefRange, expr: oc.Attributes["value"].Expr}
		if a, ok := oc.Attributes["description"]; ok {
			if v, hd := a.Expr.Value(nil); !hd.HasErrors() && v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
				n.description = v.AsString()
			}
		}
		if a, ok := oc.Attributes["sensitive"]; ok {
			if v, hd := a.Expr.Value(nil); !hd.HasErrors() && v.Type() == cty.Bool && v.IsKnown() && !v.IsNull() {
				n.sensitive = v.True()
			}
		}
		if a, ok := oc.Attributes["depends_on"]; ok {
			n.dependsOn, d.diags = dependsOn(a, d.diags)
		}
		d.nodes = []*node{n}
	case "resource":
		n, ds := resourceNode(block, src)
		d.diags = ds
		if n != nil {
			d.nodes = []*node{n}
		}
	case "data":
		d.diags = diag.Diagnostics{errAt(block.DefRange, "Data sources are not read by the gpuslice CLI",
			fmt.Sprintf("data %q %q is evaluated by the Terraform provider only; with the CLI, use `gpuslice status` or a resource attribute instead", block.Labels[0], block.Labels[1]))}
	case "module":
		n, ds := moduleNode(block)
		d.diags = ds
		if n != nil {
			d.nodes = []*node{n}
		}
	}
	return d
}

func resourceNode(block *hcl.Block, src []byte) (*node, diag.Diagnostics) {
	typ, name := block.Labels[0], block.Labels[1]
	res, ok := schema.ResourceByType(typ)
	if !ok {
		detail := fmt.Sprintf("the gpuslice CLI manages gpuslice resources only (%s)", strings.Join(resourceTypes(), ", "))
		if strings.HasPrefix(typ, "gpuslice_") {
			detail = fmt.Sprintf("%q is not a gpuslice resource type%s; the types are %s", typ, diag.Suggest(typ, resourceTypes()), strings.Join(resourceTypes(), ", "))
		}
		return nil, diag.Diagnostics{errAt(block.LabelRanges[0], "Unknown resource type", detail)}
	}
	if !hclsyntax.ValidIdentifier(name) {
		return nil, diag.Diagnostics{errAt(block.LabelRanges[1], "Invalid resource name", fmt.Sprintf("%q: a name starts with a letter and holds letters, digits, '_' and '-'", name))}
	}
	meta, body, diags := resourceBody(block)
	n := &node{addr: typ + "." + name, kind: kindResource, declRange: block.DefRange, resource: res, name: name,
		variables: bodyVariables(body), text: textOf(block, src)}
	for _, a := range []string{"count", "for_each"} {
		if attr, ok := meta.Attributes[a]; ok {
			diags = append(diags, errAt(attr.NameRange, "Unsupported meta-argument",
				fmt.Sprintf("%s is not supported by the gpuslice CLI; declare each resource, or apply this configuration with terraform or tofu", a)))
		}
	}
	for _, b := range meta.Blocks {
		diags = append(diags, errAt(b.DefRange, "Unsupported block", fmt.Sprintf("%s blocks are not supported by the gpuslice CLI", b.Type)))
	}
	if attr, ok := meta.Attributes["depends_on"]; ok {
		n.dependsOn, diags = dependsOn(attr, diags)
	}
	return n, diags
}

// resourceBody splits a resource block into its meta-arguments and the
// body its schema decodes.
func resourceBody(block *hcl.Block) (*hcl.BodyContent, *hclsyntax.Body, diag.Diagnostics) {
	meta, rest, hd := block.Body.PartialContent(resourceMeta)
	body := bodyOf(rest)
	if body == nil {
		body = bodyOf(block.Body)
	}
	return meta, body, fromHCL(hd)
}

// text is a resource block as written: its bytes and where they start.
type text struct {
	src   []byte
	start hcl.Pos
}

func textOf(block *hcl.Block, src []byte) text {
	start, end := block.DefRange.Start, bodyOf(block.Body).SrcRange.End
	return text{src: src[start.Byte:end.Byte], start: start}
}

// body parses the resource's block again, with the positions it has in
// its file, and returns the body its schema decodes.
func (n *node) body() (*hclsyntax.Body, diag.Diagnostics) {
	f, hd := hclsyntax.ParseConfig(n.text.src, n.declRange.Filename, n.text.start)
	if blocks := bodyOf(f.Body).Blocks; !hd.HasErrors() && len(blocks) == 1 {
		_, body, _ := resourceBody(blocks[0].AsHCLBlock())
		return body, nil
	}
	// It parsed as part of its file: parsed alone, it should too.
	return nil, append(fromHCL(hd), errAt(n.declRange, "Cannot read resource block",
		fmt.Sprintf("%s parsed in its file but not on its own; this is a bug in gpuslice: please report it with the block", n.addr)))
}
