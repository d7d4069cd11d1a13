package plan

import (
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// lookup follows a field path in an unstructured value whose list items
// carry their key fields.
func lookup(v any, p fieldpath.Path) (any, bool) {
	for _, pe := range p {
		next, ok := step(v, pe)
		if !ok {
			return nil, false
		}
		v = next
	}
	return v, true
}

// step follows one element of a field path in an unstructured value.
func step(cur any, pe fieldpath.PathElement) (any, bool) {
	switch {
	case pe.FieldName != nil:
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok := m[*pe.FieldName]
		return v, ok
	case pe.Key != nil:
		l, _ := cur.([]any)
		for _, e := range l {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			match := true
			for _, f := range *pe.Key {
				if !sameScalar(f.Value.Unstructured(), m[f.Name]) {
					match = false
					break
				}
			}
			if match {
				return m, true
			}
		}
	case pe.Value != nil:
		l, _ := cur.([]any)
		for _, e := range l {
			if value.Equals(value.NewValueInterface(e), *pe.Value) {
				return e, true
			}
		}
	case pe.Index != nil:
		if l, ok := cur.([]any); ok && *pe.Index < len(l) {
			return l[*pe.Index], true
		}
	}
	return nil, false
}

// valueAt returns the value at p in tv, and whether it has one. Live
// objects carry every key field of their list items; where a rendered
// item leaves one to its default, the schema finds it.
func valueAt(tv *typed.TypedValue, p fieldpath.Path) (any, bool) {
	if v, ok := lookup(tv.AsValue().Unstructured(), p); ok {
		return v, true
	}
	// Extracted, every list on the way holds only p's item.
	var cur any = tv.ExtractItems(fieldpath.NewSet(p), typed.WithAppendKeyFields()).AsValue().Unstructured()
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[*pe.FieldName]; !ok {
				return nil, false
			}
		default:
			l, ok := cur.([]any)
			if !ok || len(l) == 0 {
				return nil, false
			}
			cur = l[0]
		}
	}
	return cur, true
}

// pathString writes a field path the way Diff's subset paths read:
// .spec.hard.cpu, .spec.containers[name=app].env[name=X].
func pathString(p fieldpath.Path) string {
	var b strings.Builder
	for _, pe := range p {
		switch {
		case pe.FieldName != nil:
			b.WriteString(field(*pe.FieldName))
		case pe.Key != nil:
			var parts []string
			for _, f := range *pe.Key {
				parts = append(parts, fmt.Sprintf("%s=%v", f.Name, f.Value.Unstructured()))
			}
			b.WriteString("[" + strings.Join(parts, ",") + "]")
		case pe.Value != nil:
			b.WriteString("[" + value.ToString(*pe.Value) + "]")
		case pe.Index != nil:
			b.WriteString("[" + strconv.Itoa(*pe.Index) + "]")
		}
	}
	return b.String()
}

// field writes one step of a path: .name, or ["requests.cpu"] for keys
// that contain dots or slashes.
func field(k string) string {
	if strings.ContainsAny(k, "./") {
		return fmt.Sprintf("[%q]", k)
	}
	return "." + k
}
