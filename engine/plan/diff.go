package plan

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
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
// the same value in live (fields the API server or controllers add are not
// looked at), and every field gpuslice applied before (live's managedFields
// for the gpuslice manager) must still be desired, else it shows as
// removed.
func Diff(desired, live *unstructured.Unstructured) []FieldChange {
	var out []FieldChange
	subset(desired.Object, live.Object, "", &out)
	out = append(out, removedOwned(desired.Object, live)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// listKeys are the fields that identify elements of the associative lists
// gpuslice renders (containers, env, ports, volumes, mounts, claims).
var listKeys = []string{"name", "mountPath", "containerPort", "port"}

func subset(want, got any, path string, out *[]FieldChange) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, FieldChange{Path: path, Before: got, After: want})
			return
		}
		for _, k := range sortedKeys(w) {
			if path == "" && k == "status" {
				continue
			}
			sub := path + field(k)
			gv, present := g[k]
			if !present {
				*out = append(*out, FieldChange{Path: sub, Before: nil, After: w[k]})
				continue
			}
			subset(w[k], gv, sub, out)
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			*out = append(*out, FieldChange{Path: path, Before: got, After: want})
			return
		}
		if key := listKey(w); key != "" {
			for _, we := range w {
				wm := we.(map[string]any)
				id := wm[key]
				var match any
				for _, ge := range g {
					if gm, ok := ge.(map[string]any); ok && scalarEqual(gm[key], id, "") {
						match = gm
						break
					}
				}
				sub := fmt.Sprintf("%s[%s=%v]", path, key, id)
				if match == nil {
					*out = append(*out, FieldChange{Path: sub, Before: nil, After: we})
					continue
				}
				subset(we, match, sub, out)
			}
			return
		}
		if len(w) != len(g) {
			*out = append(*out, FieldChange{Path: path, Before: got, After: want})
			return
		}
		for i := range w {
			subset(w[i], g[i], fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		if !scalarEqual(want, got, path) {
			*out = append(*out, FieldChange{Path: path, Before: got, After: want})
		}
	}
}

// listKey returns the field identifying the elements of an associative
// list, or "" for an atomic list compared position by position.
func listKey(l []any) string {
	if len(l) == 0 {
		return ""
	}
	for _, k := range listKeys {
		all := true
		for _, e := range l {
			m, ok := e.(map[string]any)
			if !ok || m[k] == nil {
				all = false
				break
			}
		}
		if all {
			return k
		}
	}
	return ""
}

// scalarEqual compares leaf values the way the API server stores them:
// numbers by value, and quantities (resource requests, quota limits,
// storage) by amount, so "1000m" equals "1".
func scalarEqual(want, got any, path string) bool {
	if reflect.DeepEqual(want, got) {
		return true
	}
	if wf, ok := number(want); ok {
		gf, ok := number(got)
		return ok && wf == gf
	}
	ws, wok := want.(string)
	gs, gok := got.(string)
	if wok && gok && quantityPath(path) {
		wq, err1 := resource.ParseQuantity(ws)
		gq, err2 := resource.ParseQuantity(gs)
		return err1 == nil && err2 == nil && wq.Cmp(gq) == 0
	}
	return false
}

func quantityPath(path string) bool {
	return strings.Contains(path, ".resources.") || strings.Contains(path, ".hard.") || strings.HasSuffix(path, ".storage")
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

// removedOwned lists fields gpuslice applied before that desired no longer
// has, from the gpuslice entry of live's managedFields.
func removedOwned(desired map[string]any, live *unstructured.Unstructured) []FieldChange {
	var out []FieldChange
	for _, mf := range live.GetManagedFields() {
		if mf.Manager != objects.FieldManager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			continue // unreadable ownership data: nothing to report
		}
		seen := map[string]bool{}
		set.Leaves().Iterate(func(p fieldpath.Path) {
			missing, ok := firstMissing(desired, p)
			if !ok {
				return
			}
			key := missing.String()
			if seen[key] {
				return
			}
			seen[key] = true
			before, _ := valueAt(live.Object, missing)
			out = append(out, FieldChange{Path: pathString(missing), Before: before, After: nil})
		})
	}
	return out
}

// firstMissing returns the shortest prefix of p that desired does not
// contain, and whether there is one.
func firstMissing(desired map[string]any, p fieldpath.Path) (fieldpath.Path, bool) {
	var cur any = desired
	for i, pe := range p {
		next, ok := step(cur, pe)
		if !ok {
			return p[:i+1], true
		}
		cur = next
	}
	return nil, false
}

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
		l, ok := cur.([]any)
		if !ok {
			return nil, false
		}
		for _, e := range l {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			match := true
			for _, f := range *pe.Key {
				if !scalarEqual(f.Value.Unstructured(), m[f.Name], "") {
					match = false
					break
				}
			}
			if match {
				return m, true
			}
		}
		return nil, false
	case pe.Value != nil:
		l, ok := cur.([]any)
		if !ok {
			return nil, false
		}
		for _, e := range l {
			if value.Equals(value.NewValueInterface(e), *pe.Value) {
				return e, true
			}
		}
		return nil, false
	case pe.Index != nil:
		l, ok := cur.([]any)
		if !ok || *pe.Index >= len(l) {
			return nil, false
		}
		return l[*pe.Index], true
	}
	return nil, false
}

func valueAt(obj map[string]any, p fieldpath.Path) (any, bool) {
	var cur any = obj
	for _, pe := range p {
		next, ok := step(cur, pe)
		if !ok {
			return nil, false
		}
		cur = next
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

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
