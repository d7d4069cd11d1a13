package plan

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// FieldChange is one field whose live value differs from the desired one.
// Before is nil when the field is missing from the live object, After is
// nil when gpuslice set the field before and no longer does.
type FieldChange struct {
	Path   string `json:"path"`
	Before any    `json:"before"`
	After  any    `json:"after"`
}

// Diff compares only what gpuslice owns: every field of desired must hold
// the same value in live (fields the API server or controllers add, and
// defaults, are not looked at), and every field gpuslice applied before
// (live's managedFields for the gpuslice manager) must still be desired,
// else it shows as removed. Both are read with types, the API server's
// schema of their kind, the way server-side apply reads them: list items
// are matched by the keys the schema declares (in any order), atomic lists
// compared whole, sets as sets, and quantities by amount, as the API server
// stores them ("1024Mi" is "1Gi").
func Diff(desired, live *unstructured.Unstructured, types managedfields.TypeConverter) ([]FieldChange, error) {
	want, err := types.ObjectToTyped(compared(desired, false))
	if err != nil {
		return nil, fmt.Errorf("%s as gpuslice renders it does not fit the API server's schema of %s: %w; "+
			"the cluster may run an older version of the kind than gpuslice renders (upgrade what serves it), else this is a bug in gpuslice",
			refOf(desired), desired.GetKind(), err)
	}
	liveObj := compared(live, true)
	if unchanged(want.Schema(), want.TypeRef(), want.AsValue().Unstructured(), liveObj.Object) {
		// Nothing to add or modify: only fields gpuslice gave up remain to
		// be found, without reading all of live with the schema.
		out := ownedNotDesired(want.AsValue().Unstructured(), live)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
		return out, nil
	}
	got, err := types.ObjectToTyped(liveObj, typed.AllowDuplicates)
	if err != nil {
		return nil, fmt.Errorf("read %s with the API server's schema of %s: %w", refOf(live), live.GetKind(), err)
	}
	cmp, err := got.Compare(want)
	if err != nil {
		return nil, fmt.Errorf("compare %s with the cluster's: %w", refOf(desired), err)
	}
	var out []FieldChange
	for _, p := range outermost(cmp.Added) {
		after, _ := valueAt(want, p)
		out = append(out, FieldChange{Path: pathString(p), Before: nil, After: after})
	}
	for p := range cmp.Modified.All() {
		before, _ := valueAt(got, p)
		after, _ := valueAt(want, p)
		if sameQuantity(want, p, before, after) || contains(before, after) {
			continue
		}
		out = append(out, FieldChange{Path: pathString(p), Before: before, After: after})
	}
	out = append(out, removedOwned(cmp.Removed, got, live)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

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

// ownedNotDesired is removedOwned where want is unchanged in live: each
// field gpuslice owns is looked up in want and live by its path, its list
// items by their keys, which every keyed item of want then carries.
func ownedNotDesired(want any, live *unstructured.Unstructured) []FieldChange {
	var out []FieldChange
	seen := map[string]bool{}
	for p := range owned(live).All() {
		var missing fieldpath.Path
		cur := want
		for i, pe := range p {
			next, ok := step(cur, pe)
			if !ok {
				missing = p[:i+1].Copy()
				break
			}
			cur = next
		}
		if missing == nil || seen[missing.String()] {
			continue
		}
		seen[missing.String()] = true
		if before, ok := lookup(live.Object, missing); ok {
			out = append(out, FieldChange{Path: pathString(missing), Before: before, After: nil})
		}
	}
	return out
}

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

// compared is what Diff reads of an object: without its status (never
// gpuslice's) and, live, without managedFields (only removedOwned reads
// them), sharing the rest.
func compared(u *unstructured.Unstructured, live bool) *unstructured.Unstructured {
	obj := maps.Clone(u.Object)
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok && live {
		md = maps.Clone(md)
		delete(md, "managedFields")
		obj["metadata"] = md
	}
	return &unstructured.Unstructured{Object: obj}
}

func refOf(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", u.GetKind(), ns, u.GetName())
	}
	return fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
}

// outermost returns the paths of s that no other path of s contains:
// a list item added whole is one change, not one per field.
func outermost(s *fieldpath.Set) []fieldpath.Path {
	var out []fieldpath.Path
	for p := range s.All() {
		inner := false
		for i := 1; i < len(p) && !inner; i++ {
			inner = s.Has(p[:i])
		}
		if !inner {
			out = append(out, p.Copy())
		}
	}
	return out
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

// removedOwned lists the fields gpuslice applied before (the gpuslice
// entry of live's managedFields) that live still holds and desired no
// longer has (removed: every path of live that desired lacks, as Compare
// gives them), each at the outermost path desired lacks.
func removedOwned(removed *fieldpath.Set, got *typed.TypedValue, live *unstructured.Unstructured) []FieldChange {
	var out []FieldChange
	seen := map[string]bool{}
	for p := range owned(live).Intersection(removed).All() {
		missing := p
		for i := 1; i < len(p); i++ {
			if removed.Has(p[:i]) {
				missing = p[:i]
				break
			}
		}
		key := missing.String()
		if seen[key] {
			continue
		}
		seen[key] = true
		before, _ := valueAt(got, missing)
		out = append(out, FieldChange{Path: pathString(missing), Before: before, After: nil})
	}
	return out
}

// owned is what gpuslice applied to live: the fields of its entries in
// live's managedFields.
func owned(live *unstructured.Unstructured) *fieldpath.Set {
	set := &fieldpath.Set{}
	for _, mf := range live.GetManagedFields() {
		if mf.Manager != objects.FieldManager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			continue // unreadable ownership data: nothing to report
		}
		set = set.Union(s)
	}
	return set
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
