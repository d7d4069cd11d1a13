package plan

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// sameScalar compares two scalars of unstructured objects: numbers by
// value, whatever their Go type.
func sameScalar(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	x, ok1 := number(a)
	y, ok2 := number(b)
	return ok1 && ok2 && x == y
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// contains says whether an atomic map or list (replaced whole by apply,
// so compared whole) holds every field of want at the same place: the
// API server defaults fields inside them too (a device request's
// allocationMode, a fieldRef's apiVersion), and applying want again
// changes nothing. Scalars are not atomic values: false for them.
func contains(live, want any) bool {
	switch want.(type) {
	case map[string]any, []any:
		return within(live, want)
	}
	return false
}

func within(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			lv, ok := l[k]
			if !ok && wv != nil || !within(lv, wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return false
		}
		for i := range w {
			if !within(l[i], w[i]) {
				return false
			}
		}
		return true
	}
	return sameScalar(live, want)
}

// quantityType is the schema's name of resource.Quantity, which the API
// server stores in its canonical form.
const quantityType = "io.k8s.apimachinery.pkg.api.resource.Quantity"

// sameQuantity says whether before and after, at p of a value of tv's
// type, are the same amount of a quantity the schema declares.
func sameQuantity(tv *typed.TypedValue, p fieldpath.Path, before, after any) bool {
	bs, ok1 := before.(string)
	as, ok2 := after.(string)
	if !ok1 || !ok2 {
		return false
	}
	tr, ok := typeAt(tv.Schema(), tv.TypeRef(), p)
	if !ok || tr.NamedType == nil || *tr.NamedType != quantityType {
		return false
	}
	bq, err1 := resource.ParseQuantity(bs)
	aq, err2 := resource.ParseQuantity(as)
	return err1 == nil && err2 == nil && bq.Cmp(aq) == 0
}

// typeAt returns the type of the values at p under tr.
func typeAt(s *smdschema.Schema, tr smdschema.TypeRef, p fieldpath.Path) (smdschema.TypeRef, bool) {
	for _, pe := range p {
		a, ok := s.Resolve(tr)
		if !ok {
			return tr, false
		}
		switch {
		case pe.FieldName != nil && a.Map != nil:
			tr = a.Map.ElementType
			if f, ok := a.Map.FindField(*pe.FieldName); ok {
				tr = f.Type
			}
		case pe.FieldName == nil && a.List != nil:
			tr = a.List.ElementType
		default:
			return tr, false
		}
	}
	return tr, true
}
