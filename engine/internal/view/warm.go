package view

import (
	"sort"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// Warm starts, without waiting, the informers of the resources read
// cluster-wide (cluster-scoped and ClusterWide ones), so a reader that needs
// several syncs them together. Per-namespace resources need their
// namespaces: WarmIn.
func (v *View) Warm(resources ...Resource) { v.WarmIn(nil, resources...) }

// WarmIn is Warm, and starts the per-namespace resources' informers in
// each of namespaces.
func (v *View) WarmIn(namespaces []string, resources ...Resource) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	for _, res := range resources {
		if !res.perNamespace() {
			v.startLocked(entryKey{res: res})
			continue
		}
		for _, ns := range namespaces {
			if ns != "" {
				v.startLocked(entryKey{res: res, namespace: ns})
			}
		}
	}
}

// startLocked starts k's informer unless one runs; v.mu is held.
func (v *View) startLocked(k entryKey) {
	if v.entries[k] == nil {
		v.entries[k] = v.start(k)
	}
}

// WarmKinds warms the Managed resources of kinds read cluster-wide (what
// is read per namespace starts with its namespace, WarmIn; namespaces,
// read by name, at their first read).
func (v *View) WarmKinds(kinds ...objects.Kind) {
	res := make([]Resource, 0, len(kinds))
	for _, k := range kinds {
		if !k.Release {
			res = append(res, Managed(k))
		}
	}
	v.Warm(res...)
}

// Informer is one informer the view runs: a resource, in a namespace or
// ("") in all of them.
type Informer struct {
	Resource  Resource
	Namespace string
}

// Informers lists the informers the view runs, ordered: what a run reads.
func (v *View) Informers() []Informer {
	v.mu.Lock()
	out := make([]Informer, 0, len(v.entries))
	for k := range v.entries {
		out = append(out, Informer{Resource: k.res, Namespace: k.namespace})
	}
	v.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Resource.String() != b.Resource.String() {
			return a.Resource.String() < b.Resource.String()
		}
		return a.Namespace < b.Namespace
	})
	return out
}
