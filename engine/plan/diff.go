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
	got, err := types.ObjectToTyped(compared(live, true), typed.AllowDuplicates)
	if err != nil {
		return nil, fmt.Errorf("read %s with the API server's schema of %s: %w", refOf(live), live.GetKind(), err)
	}
	cmp, err := got.Compare(want)
	if err != nil {
		return nil, fmt.Errorf("compare %s with the cluster's: %w", refOf(desired), err)
	}
	var out []FieldChange
	for _, p := range outermost(cmp.Added) {
		after, _ := valueAt(want, p, cmp.Added)
		out = append(out, FieldChange{Path: pathString(p), Before: nil, After: after})
	}
	for p := range cmp.Modified.All() {
		before, _ := valueAt(got, p, nil)
		after, _ := valueAt(want, p, nil)
		if sameQuantity(want, p, before, after) || contains(before, after) {
			continue
		}
		out = append(out, FieldChange{Path: pathString(p), Before: before, After: after})
	}
	out = append(out, removedOwned(cmp.Removed, got, live)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
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

// valueAt returns the value at p in tv, and whether it has one: with the
// paths of within under p (a map or list item's fields), else as a leaf.
func valueAt(tv *typed.TypedValue, p fieldpath.Path, within *fieldpath.Set) (any, bool) {
	paths := fieldpath.NewSet(p)
	if within != nil {
		for q := range within.All() {
			if len(q) > len(p) && q[:len(p)].Equals(p) {
				paths.Insert(q)
			}
		}
	}
	// Extracted, every list on the way holds only p's item.
	var cur any = tv.ExtractItems(paths, typed.WithAppendKeyFields()).AsValue().Unstructured()
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
	return value.Equals(value.NewValueInterface(live), value.NewValueInterface(want))
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
	owned := &fieldpath.Set{}
	for _, mf := range live.GetManagedFields() {
		if mf.Manager != objects.FieldManager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			continue // unreadable ownership data: nothing to report
		}
		owned = owned.Union(set)
	}
	var out []FieldChange
	seen := map[string]bool{}
	for p := range owned.Intersection(removed).All() {
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
		before, _ := valueAt(got, missing, removed)
		out = append(out, FieldChange{Path: pathString(missing), Before: before, After: nil})
	}
	return out
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
