package plan

import (
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
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
func unchanged(s *smdschema.Schema, tr smdschema.TypeRef, want, live any) bool {
	a, ok := s.Resolve(tr)
	if !ok {
		return false
	}
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok || a.Map == nil {
			return false
		}
		if a.Map.ElementRelationship == smdschema.Atomic {
			return within(l, w)
		}
		for k, wv := range w {
			lv, ok := l[k]
			if !ok {
				return false
			}
			ft := a.Map.ElementType
			if f, ok := a.Map.FindField(k); ok {
				ft = f.Type
			}
			if !unchanged(s, ft, wv, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || a.List == nil || len(l) != len(w) {
			return false
		}
		if a.List.ElementRelationship == smdschema.Atomic {
			return within(l, w)
		}
		for i := range w {
			if m, ok := w[i].(map[string]any); ok {
				for _, k := range a.List.Keys {
					if _, ok := m[k]; !ok {
						return false
					}
				}
			}
			if !unchanged(s, a.List.ElementType, w[i], l[i]) {
				return false
			}
		}
		return true
	}
	return a.Scalar != nil && sameScalar(want, live)
}
