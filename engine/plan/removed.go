package plan

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// ownedNotDesired is removedOwned where want is unchanged in live: each
// field gpuslice owns is looked up in want and live by its path, its list
// items by their keys, which every keyed item of want then carries. live
// is converted only when such a field is found.
func ownedNotDesired(want any, live runtime.Object) ([]FieldChange, error) {
	var out []FieldChange
	var liveU *unstructured.Unstructured
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
		if liveU == nil {
			var err error
			if liveU, err = Unstructured(live); err != nil {
				return nil, err
			}
		}
		if before, ok := lookup(liveU.Object, missing); ok {
			out = append(out, FieldChange{Path: pathString(missing), Before: before, After: nil})
		}
	}
	return out, nil
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
func owned(live runtime.Object) *fieldpath.Set {
	set := &fieldpath.Set{}
	m, err := meta.Accessor(live)
	if err != nil {
		return set
	}
	for _, mf := range m.GetManagedFields() {
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
