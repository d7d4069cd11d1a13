package objects

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// Encoded is a live object kept as its protobuf encoding, beside the few
// metadata an informer's keys, indexes and barriers read: name,
// namespace, resourceVersion and the labels asked for (encoded_meta.go).
// A Deployment decoded into its client-go type holds about 4–5 KiB of
// heap, encoded about a third of that, and a plan reads each object once:
// the view keeps the objects of the kinds gpuslice applies this way, and
// decodes one when it is read. The metadata are kept as fields of their
// own, about 200 bytes an object: a metav1.ObjectMeta with a map of
// labels took about 470, 2.8 MB of a no-change plan of 1000 workloads.
type Encoded struct {
	name, namespace, resourceVersion string
	labels                           []string // the kept labels: key, value, key, value…
	gvk                              schema.GroupVersionKind
	raw                              []byte
}

// protoObject is a client-go type with its generated protobuf methods.
type protoObject interface {
	runtime.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// Encode keeps obj encoded, with the labels named in keep; false when obj
// is not a client-go type with a protobuf encoding (a custom resource,
// unstructured), which is then kept as it is.
func Encode(obj runtime.Object, gvk schema.GroupVersionKind, keep ...string) (*Encoded, bool, error) {
	p, ok := obj.(protoObject)
	if !ok {
		return nil, false, nil
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, false, nil
	}
	raw, err := p.Marshal()
	if err != nil {
		return nil, false, fmt.Errorf("encode %s %s/%s: %w", gvk.Kind, m.GetNamespace(), m.GetName(), err)
	}
	e := &Encoded{gvk: gvk, raw: raw, name: m.GetName(), namespace: m.GetNamespace(), resourceVersion: m.GetResourceVersion()}
	for _, k := range keep {
		if v, ok := m.GetLabels()[k]; ok {
			e.labels = append(e.labels, k, v)
		}
	}
	return e, true, nil
}

// Decode returns the object e encodes, a new one at each call (the caller
// may keep and change it), with its kind set.
func (e *Encoded) Decode() (runtime.Object, error) {
	obj, err := scheme.Scheme.New(e.gvk)
	if err != nil {
		return nil, fmt.Errorf("decode %s %s/%s: %w", e.gvk.Kind, e.namespace, e.name, err)
	}
	p, ok := obj.(protoObject)
	if !ok {
		return nil, fmt.Errorf("decode %s %s/%s: %T has no protobuf encoding; this is a bug in gpuslice", e.gvk.Kind, e.namespace, e.name, obj)
	}
	if err := p.Unmarshal(e.raw); err != nil {
		return nil, fmt.Errorf("decode %s %s/%s: %w", e.gvk.Kind, e.namespace, e.name, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(e.gvk)
	return obj, nil
}

// GetObjectKind, SetGroupVersionKind, GroupVersionKind and DeepCopyObject
// make an Encoded object a runtime.Object, as an informer's store needs.
func (e *Encoded) GetObjectKind() schema.ObjectKind { return e }

func (e *Encoded) SetGroupVersionKind(gvk schema.GroupVersionKind) { e.gvk = gvk }

func (e *Encoded) GroupVersionKind() schema.GroupVersionKind { return e.gvk }

func (e *Encoded) DeepCopyObject() runtime.Object {
	c := *e // the encoding is never changed
	c.labels = slices.Clone(e.labels)
	return &c
}

// Decoded returns obj, or the object it encodes when it is Encoded.
func Decoded(obj runtime.Object) (runtime.Object, error) {
	if e, ok := obj.(*Encoded); ok {
		return e.Decode()
	}
	return obj, nil
}
