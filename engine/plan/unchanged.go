package plan

import (
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// unchanged says whether live holds every field of want at the same
// place, walking want with its type tr: true only when comparing them with
// the schema would find nothing to add or modify, the common case, which
// it tells at a fraction of the cost. Lists must have the same length and
// their items in the same order; an item of a keyed list must carry every
// key field (the schema may default one that live holds otherwise);
// atomic values are compared as Diff does (contains); scalars by value.
// Anything else (a quantity written otherwise, a reordered list, a field
// the schema lacks) is false, and Diff compares with the schema.
//
// live is read where it lies, the view's client-go object through
// reflection (or an unstructured one): only the fields want names are
// visited, and nothing of live is copied.
func unchanged(s *smdschema.Schema, tr smdschema.TypeRef, want any, live value.Value) bool {
	w := walker{s: s, a: value.NewFreelistAllocator()}
	return w.unchanged(tr, want, live)
}

type walker struct {
	s *smdschema.Schema
	a value.Allocator
}

func (w walker) unchanged(tr smdschema.TypeRef, want any, live value.Value) bool {
	a, ok := w.s.Resolve(tr)
	if !ok {
		return false
	}
	switch wv := want.(type) {
	case map[string]any:
		if !live.IsMap() || a.Map == nil {
			return false
		}
		if a.Map.ElementRelationship == smdschema.Atomic {
			return within(live.Unstructured(), wv)
		}
		m := live.AsMapUsing(w.a)
		defer w.a.Free(m)
		for k, v := range wv {
			lv, ok := m.GetUsing(w.a, k)
			if !ok {
				return false
			}
			ft := a.Map.ElementType
			if f, ok := a.Map.FindField(k); ok {
				ft = f.Type
			}
			same := w.unchanged(ft, v, lv)
			w.a.Free(lv)
			if !same {
				return false
			}
		}
		return true
	case []any:
		if !live.IsList() || a.List == nil {
			return false
		}
		l := live.AsListUsing(w.a)
		defer w.a.Free(l)
		if l.Length() != len(wv) {
			return false
		}
		if a.List.ElementRelationship == smdschema.Atomic {
			return within(live.Unstructured(), wv)
		}
		for i := range wv {
			if m, ok := wv[i].(map[string]any); ok {
				for _, k := range a.List.Keys {
					if _, ok := m[k]; !ok {
						return false
					}
				}
			}
			lv := l.AtUsing(w.a, i)
			same := w.unchanged(a.List.ElementType, wv[i], lv)
			w.a.Free(lv)
			if !same {
				return false
			}
		}
		return true
	}
	return a.Scalar != nil && sameValue(want, live)
}

// sameValue is sameScalar with live as a value.
func sameValue(want any, live value.Value) bool {
	switch w := want.(type) {
	case string:
		return live.IsString() && live.AsString() == w
	case bool:
		return live.IsBool() && live.AsBool() == w
	case nil:
		return live.IsNull()
	}
	x, ok := number(want)
	switch {
	case !ok:
		return false
	case live.IsInt():
		return float64(live.AsInt()) == x
	case live.IsFloat():
		return live.AsFloat() == x
	}
	return false
}
