package plan

import (
	"fmt"
	"maps"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
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
func Diff(desired *unstructured.Unstructured, live runtime.Object, types managedfields.TypeConverter) ([]FieldChange, error) {
	want := compared(desired, false)
	if s, tr, ok := typeOf(types, desired); ok && unchanged(s, tr, want.Object, valueOf(live)) {
		// Nothing to add or modify: only fields gpuslice gave up remain to
		// be found, without reading all of live with the schema.
		out, err := ownedNotDesired(want.Object, live)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
		return out, err
	}
	typedWant, err := types.ObjectToTyped(want)
	if err != nil {
		return nil, fmt.Errorf("%s as gpuslice renders it does not fit the API server's schema of %s: %w; "+
			"the cluster may run an older version of the kind than gpuslice renders (upgrade what serves it), else this is a bug in gpuslice",
			refOf(desired), desired.GetKind(), err)
	}
	liveU, err := Unstructured(live)
	if err != nil {
		return nil, err
	}
	got, err := types.ObjectToTyped(compared(liveU, true), typed.AllowDuplicates)
	if err != nil {
		return nil, fmt.Errorf("read %s with the API server's schema of %s: %w", refOf(liveU), liveU.GetKind(), err)
	}
	cmp, err := got.Compare(typedWant)
	if err != nil {
		return nil, fmt.Errorf("compare %s with the cluster's: %w", refOf(desired), err)
	}
	var out []FieldChange
	for _, p := range outermost(cmp.Added) {
		after, _ := valueAt(typedWant, p)
		out = append(out, FieldChange{Path: pathString(p), Before: nil, After: after})
	}
	for p := range cmp.Modified.All() {
		before, _ := valueAt(got, p)
		after, _ := valueAt(typedWant, p)
		if sameQuantity(typedWant, p, before, after) || contains(before, after) {
			continue
		}
		out = append(out, FieldChange{Path: pathString(p), Before: before, After: after})
	}
	out = append(out, removedOwned(cmp.Removed, got, liveU)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// typeOf is the schema and the type of desired's kind, read from an object
// holding only its kind: the fast path walks desired with them, unvalidated
// (a field the schema lacks sends it to the slow path, which says so).
func typeOf(types managedfields.TypeConverter, desired *unstructured.Unstructured) (*smdschema.Schema, smdschema.TypeRef, bool) {
	bare := &unstructured.Unstructured{Object: map[string]any{"apiVersion": desired.GetAPIVersion(), "kind": desired.GetKind()}}
	tv, err := types.ObjectToTyped(bare)
	if err != nil {
		return nil, smdschema.TypeRef{}, false
	}
	return tv.Schema(), tv.TypeRef(), true
}

// valueOf reads live where it lies: an unstructured object's maps, or a
// client-go object's fields through reflection.
func valueOf(live runtime.Object) value.Value {
	if u, ok := live.(*unstructured.Unstructured); ok {
		return value.NewValueInterface(u.Object)
	}
	v, err := value.NewValueReflect(live)
	if err != nil {
		return value.NewValueInterface(nil) // compares unequal: the slow path reads it
	}
	return v
}

// Unstructured is live as an unstructured object: itself when it is one
// (the caller must not change it), else a conversion of its client-go
// type, a copy of its own.
func Unstructured(live runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := live.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return nil, fmt.Errorf("convert %s to unstructured: %w", live.GetObjectKind().GroupVersionKind(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(live.GetObjectKind().GroupVersionKind())
	return u, nil
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
