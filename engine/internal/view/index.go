package view

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/render"
)

// Index names: objects by namespace, by name, and by the workload or
// preload label (value "<namespace>/<label value>").
const (
	IndexNamespace  = cache.NamespaceIndex
	IndexName       = "name"
	IndexWorkload   = "workload"
	IndexPreloadFor = "preload-for"
)

// indexedLabels are the labels the indexes read, which an encoded object
// keeps beside its encoding.
var indexedLabels = []string{objects.LabelWorkload, render.LabelPreloadFor}

var indexers = cache.Indexers{
	IndexNamespace: cache.MetaNamespaceIndexFunc,
	IndexName: func(obj any) ([]string, error) {
		return metaValue(obj, func(m metav1.Object) string { return m.GetName() })
	},
	IndexWorkload:   labelIndex(objects.LabelWorkload),
	IndexPreloadFor: labelIndex(render.LabelPreloadFor),
}

// startIndexers are the indexes an informer of k keeps from its start:
// the namespace index where one informer holds many namespaces (List of
// some of them). The others are added at their first use (byIndex): a
// plan's informers hold thousands of objects and never ask for them.
func startIndexers(k entryKey) (cache.Indexers, map[string]bool) {
	if k.namespace == "" && k.res.Namespaced {
		return cache.Indexers{IndexNamespace: indexers[IndexNamespace]}, map[string]bool{IndexNamespace: true}
	}
	return cache.Indexers{}, map[string]bool{}
}

// byIndex returns what e's informer holds whose index has value, adding
// the index at its first use.
func (e *entry) byIndex(index, value string) ([]any, error) {
	f, ok := indexers[index]
	if !ok {
		return nil, fmt.Errorf("read %s: no index %q; this is a bug in gpuslice", e.what(), index)
	}
	if e.keepIndex(index, f) {
		return e.informer.GetIndexer().ByIndex(index, value)
	}
	// Stopped meanwhile (the view was reset or closed): an informer takes
	// no index then, so look through what it holds.
	var out []any
	for _, obj := range e.informer.GetIndexer().List() {
		values, err := f(obj)
		if err != nil {
			return nil, err
		}
		if slices.Contains(values, value) {
			out = append(out, obj)
		}
	}
	return out, nil
}

// keepIndex reports whether e's informer keeps index, adding it (which
// indexes what it holds) if it can.
func (e *entry) keepIndex(index string, f cache.IndexFunc) bool {
	e.indexMu.Lock()
	defer e.indexMu.Unlock()
	if !e.indexed[index] && e.informer.AddIndexers(cache.Indexers{index: f}) == nil {
		e.indexed[index] = true
	}
	return e.indexed[index]
}

func labelIndex(key string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		return metaValue(obj, func(m metav1.Object) string {
			if v, ok := m.GetLabels()[key]; ok {
				return m.GetNamespace() + "/" + v
			}
			return ""
		})
	}
}

func metaValue(obj any, f func(metav1.Object) string) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if v := f(m); v != "" {
		return []string{v}, nil
	}
	return nil, nil
}
