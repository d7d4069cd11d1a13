package objects

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Object is one rendered object and the resource it came from. A
// client-go object is held as its protobuf encoding (Encoded), a third of
// the memory of its Go value and a tenth of unstructured maps: a plan of
// thousands of workloads holds its rendered objects from rendering to its
// digest, and compares or applies one at a time. A kind client-go does not
// know stays unstructured. Unstructured converts one where it is compared
// or applied.
type Object struct {
	Address string
	src     runtime.Object
	gvk     schema.GroupVersionKind
}

// New is obj, rendered for the resource at address, as apiVersion/kind.
func New(address string, obj runtime.Object, apiVersion, kind string) Object {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	if e, ok, err := Encode(obj, gvk); ok && err == nil {
		return Object{Address: address, src: e, gvk: gvk}
	}
	// Not a client-go type (unstructured: a custom resource's kind): kept
	// as it is. So is a client-go object that fails to encode, which
	// generated code does not do; it is then held as its Go value.
	return Object{Address: address, src: obj, gvk: gvk}
}

// FromUnstructured is u, rendered for the resource at address.
func FromUnstructured(address string, u *unstructured.Unstructured) Object {
	return Object{Address: address, src: u, gvk: u.GroupVersionKind()}
}

// Unstructured is the object as it is applied: without status (written by
// controllers), nulls and empty maps and lists (they carry no intent and
// would claim fields under server-side apply). A client-go object is
// decoded and converted each time, into a copy of the caller's; an
// unstructured one is the object itself, never to be changed.
func (o Object) Unstructured() (*unstructured.Unstructured, error) {
	if u, ok := o.src.(*unstructured.Unstructured); ok {
		return u, nil
	}
	src, err := Decoded(o.src)
	if err != nil {
		return nil, fmt.Errorf("render %s %s: %w", o.gvk.Kind, o.Address, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
	if err != nil {
		return nil, fmt.Errorf("render %s %s: %w", o.gvk.Kind, o.Address, err)
	}
	delete(m, "status")
	Prune(m)
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(o.gvk)
	return u, nil
}

// MustUnstructured is Unstructured for tests and for objects known to
// convert (every client-go type does).
func (o Object) MustUnstructured() *unstructured.Unstructured {
	u, err := o.Unstructured()
	if err != nil {
		panic(err)
	}
	return u
}

// None says whether o is the zero Object, which names nothing.
func (o Object) None() bool { return o.src == nil }

// GroupVersionKind is the object's API version and kind.
func (o Object) GroupVersionKind() schema.GroupVersionKind { return o.gvk }

// Ref returns the object's Ref.
func (o Object) Ref() Ref {
	m, err := meta.Accessor(o.src)
	if err != nil {
		panic(fmt.Sprintf("rendered %T has no metadata: %v", o.src, err)) // every rendered kind has
	}
	return Ref{Group: o.gvk.Group, Kind: o.gvk.Kind, Namespace: m.GetNamespace(), Name: m.GetName()}
}

// Kind returns how the object's kind is handled; rendered kinds are always
// known.
func (o Object) Kind() Kind {
	k, err := KindOf(o.gvk.Group, o.gvk.Kind)
	if err != nil {
		panic(err)
	}
	return k
}

// Prune removes nulls and empty maps and lists; emptyDir: {} is meaningful
// and kept. It says whether m is left empty.
func Prune(m map[string]any) bool {
	for k, v := range m {
		switch t := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			if k == "emptyDir" {
				continue
			}
			if Prune(t) {
				delete(m, k)
			}
		case []any:
			for _, e := range t {
				if em, ok := e.(map[string]any); ok {
					Prune(em)
				}
			}
			if len(t) == 0 {
				delete(m, k)
			}
		}
	}
	return len(m) == 0
}
