// Package viewtest builds a view of the cluster over client-go's fake
// dynamic client, for small fast tests of what reads the view.
package viewtest

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/gpuslice/gpuslice/engine/internal/view"
)

// New returns a view of a fake cluster holding objs (typed or
// unstructured), closed when the test ends.
func New(t testing.TB, objs ...runtime.Object) (*view.View, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	var us []runtime.Object
	for _, o := range objs {
		us = append(us, Unstructured(t, o))
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), view.ListKinds(), us...)
	v := view.New(client, nil)
	t.Cleanup(v.Close)
	return v, client
}

// Unstructured converts a client-go object, its kind set from the scheme.
func Unstructured(t testing.TB, o runtime.Object) *unstructured.Unstructured {
	t.Helper()
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(o)
	if err != nil || len(gvks) == 0 {
		t.Fatalf("%T: no kind in client-go's scheme: %v", o, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvks[0])
	return u
}
