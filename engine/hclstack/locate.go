package hclstack

import (
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// locate finds the source range of an attribute path such as
// "container.image", "container.port[1].name" or `slices["v100-8gi"]`
// inside a resource body: the deepest part of the path that is written out,
// else the resource block itself.
func locate(body *hclsyntax.Body, fallback hcl.Range, path string) hcl.Range {
	return spotsOf(body).find(fallback, path)
}

// spots are where a resource body writes each of its parts, by path:
// attributes ("image"), blocks with their index ("container[0]"), the items
// of a tuple ("command[1]") and the literal keys of an object
// (`env["MODE"]`). A loaded configuration keeps these, not the syntax
// tree they come from (ten times their size), to locate diagnostics found
// after loading.
type spots []spot

type spot struct {
	path      string
	line, col int32
}

func spotsOf(body *hclsyntax.Body) spots {
	var s spots
	if body != nil {
		s.body("", body)
	}
	return s
}

func (s *spots) add(path string, r hcl.Range) {
	*s = append(*s, spot{path: path, line: int32(r.Start.Line), col: int32(r.Start.Column)})
}

func (s *spots) body(prefix string, b *hclsyntax.Body) {
	for name, a := range b.Attributes {
		s.add(prefix+name, a.Expr.Range())
		s.within(prefix+name, a.Expr)
	}
	seen := map[string]int{}
	for _, blk := range b.Blocks {
		p := prefix + blk.Type + "[" + strconv.Itoa(seen[blk.Type]) + "]"
		seen[blk.Type]++
		s.add(p, blk.DefRange())
		s.body(p+".", blk.Body)
	}
}

// within adds the items of a tuple and the literal keys of an object.
func (s *spots) within(path string, e hclsyntax.Expression) {
	switch x := e.(type) {
	case *hclsyntax.TupleConsExpr:
		for i, item := range x.Exprs {
			p := path + "[" + strconv.Itoa(i) + "]"
			s.add(p, item.Range())
			s.within(p, item)
		}
	case *hclsyntax.ObjectConsExpr:
		for _, item := range x.Items {
			k, d := item.KeyExpr.Value(nil)
			if d.HasErrors() || !k.IsKnown() || k.IsNull() || !k.Type().Equals(cty.String) {
				continue // a computed key: only its object is located
			}
			p := path + "[" + strconv.Quote(k.AsString()) + "]"
			s.add(p, item.KeyExpr.Range())
			s.within(p, item.ValueExpr)
		}
	}
}

func (s spots) at(path string) (spot, bool) {
	for _, sp := range s {
		if sp.path == path {
			return sp, true
		}
	}
	return spot{}, false
}

// find is the range of the deepest written part of path, else fallback.
func (s spots) find(fallback hcl.Range, path string) hcl.Range {
	best := fallback
	found := func(sp spot) {
		best = hcl.Range{Filename: fallback.Filename, Start: hcl.Pos{Line: int(sp.line), Column: int(sp.col)}}
		best.End = best.Start
	}
	if path == "" {
		return best
	}
	steps := splitPath(path)
	cur, inExpr := "", false // inExpr: past an attribute, inside its value
	for i := 0; i < len(steps); i++ {
		st := steps[i]
		switch {
		case st.name != "" && !inExpr:
			if sp, ok := s.at(cur + st.name); ok {
				found(sp)
				cur, inExpr = cur+st.name, true
				continue
			}
			idx := 0
			if i+1 < len(steps) && steps[i+1].index >= 0 {
				idx = steps[i+1].index
				i++
			}
			p := cur + st.name + "[" + strconv.Itoa(idx) + "]"
			sp, ok := s.at(p)
			if !ok {
				return best
			}
			found(sp)
			cur = p + "."
		case st.index >= 0 && inExpr:
			sp, ok := s.at(cur + "[" + strconv.Itoa(st.index) + "]")
			if !ok {
				return best
			}
			found(sp)
			cur += "[" + strconv.Itoa(st.index) + "]"
		case st.key != nil && inExpr:
			p := cur + "[" + strconv.Quote(*st.key) + "]"
			sp, ok := s.at(p)
			if !ok {
				return best
			}
			found(sp)
			cur = p
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
