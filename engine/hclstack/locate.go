package hclstack

import (
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// locate finds the source range of an attribute path such as
// "container.image", "container.port[1].name" or `slices["v100-8gi"]`
// inside a resource body: the deepest part of the path that is written out,
// else the resource block itself.
func locate(body *hclsyntax.Body, fallback hcl.Range, path string) hcl.Range {
	best := fallback
	if body == nil || path == "" {
		return best
	}
	steps := splitPath(path)
	var expr hclsyntax.Expression
	for i := 0; i < len(steps); i++ {
		st := steps[i]
		switch {
		case st.name != "" && body != nil:
			if a, ok := body.Attributes[st.name]; ok {
				expr, body = a.Expr, nil
				best = a.Expr.Range()
				continue
			}
			var blocks []*hclsyntax.Block
			for _, b := range body.Blocks {
				if b.Type == st.name {
					blocks = append(blocks, b)
				}
			}
			if len(blocks) == 0 {
				return best
			}
			idx := 0
			if i+1 < len(steps) && steps[i+1].index >= 0 {
				idx = steps[i+1].index
				i++
			}
			if idx >= len(blocks) {
				return best
			}
			body = blocks[idx].Body
			best = blocks[idx].DefRange()
		case st.index >= 0 && expr != nil:
			tuple, ok := expr.(*hclsyntax.TupleConsExpr)
			if !ok || st.index >= len(tuple.Exprs) {
				return best
			}
			expr = tuple.Exprs[st.index]
			best = expr.Range()
		case st.key != nil && expr != nil:
			obj, ok := expr.(*hclsyntax.ObjectConsExpr)
			if !ok {
				return best
			}
			found := false
			for _, item := range obj.Items {
				k, d := item.KeyExpr.Value(nil)
				if d.HasErrors() || !k.IsKnown() || k.IsNull() || k.Type().FriendlyName() != "string" {
					// A computed key such as (gpuslice_package.small.name):
					// match it by its source text's last name instead.
					if strings.HasSuffix(strings.TrimRight(string(item.KeyExpr.Range().SliceBytes(nil)), ")"), *st.key) {
						found = true
					}
				} else if k.AsString() == *st.key {
					found = true
				}
				if found {
					expr = item.ValueExpr
					best = item.KeyExpr.Range()
					break
				}
			}
			if !found {
				return best
			}
		default:
			return best
		}
	}
	return best
}

type pathStep struct {
	name  string
	index int
	key   *string
}

// splitPath parses a.b[0].c["k"] into steps.
func splitPath(path string) []pathStep {
	var steps []pathStep
	for len(path) > 0 {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return steps
			}
			inner := path[1:end]
			if k, err := strconv.Unquote(inner); err == nil {
				steps = append(steps, pathStep{index: -1, key: &k})
			} else if n, err := strconv.Atoi(inner); err == nil {
				steps = append(steps, pathStep{index: n})
			}
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			steps = append(steps, pathStep{name: path[:end], index: -1})
			path = path[end:]
		}
	}
	return steps
}
