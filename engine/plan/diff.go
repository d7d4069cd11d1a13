package plan

import (
	"fmt"
	"maps"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
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
