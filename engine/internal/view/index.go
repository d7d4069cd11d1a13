package view

import (
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

var indexers = cache.Indexers{
	IndexNamespace: cache.MetaNamespaceIndexFunc,
	IndexName: func(obj any) ([]string, error) {
		return metaValue(obj, func(m metav1.Object) string { return m.GetName() })
	},
	IndexWorkload:   labelIndex(objects.LabelWorkload),
	IndexPreloadFor: labelIndex(render.LabelPreloadFor),
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
