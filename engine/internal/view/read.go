package view

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	goruntime "runtime"
	"sync"
	"weak"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// part is one informer and the namespaces to take from it (all when none).
type part struct {
	e          *entry
	namespaces []string
}

// covering returns the informers that hold res in namespaces (everywhere
// when none): one per namespace for a per-namespace resource; else one
// cluster-wide, or — without the right to read it cluster-wide — one per
// namespace.
func (v *View) covering(ctx context.Context, res Resource, namespaces []string) ([]part, error) {
	if res.perNamespace() {
		if len(namespaces) == 0 {
			return nil, fmt.Errorf("read %s: no namespace named; this is a bug in gpuslice", res)
		}
		return v.perNamespace(ctx, res, namespaces)
	}
	e, err := v.entry(ctx, res, "")
	switch {
	case err == nil:
		return []part{{e: e, namespaces: namespaces}}, nil
	case apierrors.IsForbidden(err) && res.Namespaced && len(namespaces) > 0:
		return v.perNamespace(ctx, res, namespaces)
	}
	return nil, err
}

func (v *View) perNamespace(ctx context.Context, res Resource, namespaces []string) ([]part, error) {
	var out []part
	for _, ns := range dedupe(namespaces) {
		e, err := v.entry(ctx, res, ns)
		if err != nil {
			return nil, err
		}
		out = append(out, part{e: e})
	}
	return out, nil
}

// List returns the objects of res in namespaces (everywhere when none):
// as their client-go type when the kind is one client-go knows (always for
// Typed resources), else unstructured. They may be the cache's own: never
// modify them; As gives a copy of one.
func (v *View) List(ctx context.Context, res Resource, namespaces ...string) ([]any, error) {
	parts, err := v.covering(ctx, res, namespaces)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, p := range parts {
		if len(p.namespaces) == 0 {
			out = append(out, p.e.informer.GetIndexer().List()...)
			continue
		}
		for _, ns := range dedupe(p.namespaces) {
			objs, err := p.e.byIndex(IndexNamespace, ns)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
	}
	return decoded(out)
}

// ByIndex returns the objects of res in namespace whose index has value.
func (v *View) ByIndex(ctx context.Context, res Resource, namespace, index, value string) ([]any, error) {
	var namespaces []string
	if namespace != "" {
		namespaces = []string{namespace}
	}
	parts, err := v.covering(ctx, res, namespaces)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, p := range parts {
		objs, err := p.e.byIndex(index, value)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return decoded(out)
}

// decoded replaces the encoded objects among objs, the cache's own, with
// the objects they encode.
func decoded(objs []any) ([]any, error) {
	for i, o := range objs {
		if e, ok := o.(*objects.Encoded); ok {
			obj, err := e.Decode()
			if err != nil {
				return nil, err
			}
			objs[i] = obj
		}
	}
	return objs, nil
}

// Get returns the object of res named name in namespace; nil when the view
// has none (then none exists within res's selectors).
func (v *View) Get(ctx context.Context, res Resource, namespace, name string) (any, error) {
	obj, err := v.held(ctx, res, namespace, name)
	if e, ok := obj.(*objects.Encoded); ok && err == nil {
		return e.Decode()
	}
	return obj, err
}

// held is Get's object as the view holds it: perhaps encoded.
func (v *View) held(ctx context.Context, res Resource, namespace, name string) (any, error) {
	var namespaces []string
	if namespace != "" {
		namespaces = []string{namespace}
	}
	parts, err := v.covering(ctx, res, namespaces)
	if err != nil {
		return nil, err
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	for _, p := range parts {
		obj, exists, err := p.e.informer.GetIndexer().GetByKey(key)
		if err != nil {
			return nil, err
		}
		if exists {
			return obj, nil
		}
	}
	return nil, nil
}

// Fetch reads one object from the API server, bypassing the view: for an
// object outside every informer's selectors. nil when it does not exist.
func (v *View) Fetch(ctx context.Context, res Resource, namespace, name string) (*unstructured.Unstructured, error) {
	var u *unstructured.Unstructured
	var err error
	if res.Namespaced {
		u, err = v.client.Resource(res.GVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	} else {
		u, err = v.client.Resource(res.GVR).Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u.SetGroupVersionKind(res.GVR.GroupVersion().WithKind(res.Kind))
	return u, nil
}

// Object returns the live object ref names: the view's own (never change
// it; objects.Decoded gives it decoded when it is kept encoded), or — when
// gpuslice's labels are not on it — one read from the API server, so an
// object in the way is still found. nil when none exists. A plan holds
// every live object of its stack at once: encoded, they take a third of
// the memory.
func (v *View) Object(ctx context.Context, ref objects.Ref) (runtime.Object, error) {
	kind, err := objects.KindOf(ref.Group, ref.Kind)
	if err != nil {
		return nil, err
	}
	res := Managed(kind)
	if kind.Release {
		res = NamespaceNamed(ref.Name) // holds it, labelled or not
	}
	obj, err := v.held(ctx, res, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	if obj != nil {
		o, ok := obj.(runtime.Object)
		if !ok {
			return nil, fmt.Errorf("%T in the view of %s; this is a bug in gpuslice", obj, res)
		}
		return o, nil
	}
	if kind.Release {
		return nil, nil
	}
	if res.Namespaced {
		// Nothing can be in the way in a namespace that does not exist:
		// a stack that creates its namespaces asks nothing per object
		// (thousands of requests, throttled, at a first apply). Without
		// the right to read namespaces, every object is asked for.
		ns, err := v.held(ctx, NamespaceNamed(ref.Namespace), "", ref.Namespace)
		switch {
		case err != nil && !apierrors.IsForbidden(err):
			return nil, fmt.Errorf("read %s: namespace: %w", ref, err)
		case err == nil && ns == nil:
			return nil, nil
		}
	}
	u, err := v.Fetch(ctx, res, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	if u == nil {
		return nil, nil // not a nil *Unstructured in an interface
	}
	return u, nil
}

// Live returns a copy of Object as unstructured, which the caller may keep
// and change; nil when none exists.
func (v *View) Live(ctx context.Context, ref objects.Ref) (*unstructured.Unstructured, error) {
	obj, err := v.Object(ctx, ref)
	if err != nil || obj == nil {
		return nil, err
	}
	if obj, err = objects.Decoded(obj); err != nil {
		return nil, err
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.DeepCopy(), nil
	default:
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("convert %s to unstructured: %w", ref, err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
		return u, nil
	}
}

// Typed returns the objects of a typed resource as their type.
func Typed[T any](objs []any) []*T {
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

// As returns an object of a Managed resource as its client-go type, a copy
// the caller may change: of the view's typed object, or converted from its
// unstructured one (a custom resource, or a view without a config); nil
// for nil.
func As[T any](obj any) (*T, error) {
	if obj == nil {
		return nil, nil
	}
	if t, ok := obj.(*T); ok {
		if o, ok := any(t).(runtime.Object); ok {
			return any(o.DeepCopyObject()).(*T), nil // the cache's own stays as it is
		}
		return t, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%T is not unstructured; this is a bug in gpuslice", obj)
	}
	key := converted{weak.Make(u), reflect.TypeFor[T]()}
	if c, ok := conversions.Load(key); ok {
		return any(c.(runtime.Object).DeepCopyObject()).(*T), nil
	}
	t := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(withoutManagedFields(u.Object), t); err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	if c, ok := any(t).(runtime.Object); ok {
		if _, loaded := conversions.LoadOrStore(key, c.DeepCopyObject()); !loaded {
			goruntime.AddCleanup(u, func(k converted) { conversions.Delete(k) }, key)
		}
	}
	return t, nil
}

// conversions memoizes As, which a plan calls for the same object more than
// once (its read-back, then its status): the view never changes an object in
// place (an update stores a new one), so a conversion holds for as long as
// its object lives, and its entry goes with it. As hands out a deep copy,
// many times cheaper than converting again, so a caller may change it.
var conversions sync.Map // converted → runtime.Object

type converted struct {
	obj weak.Pointer[unstructured.Unstructured]
	typ reflect.Type
}

// withoutManagedFields is obj without metadata.managedFields, sharing the
// rest: no typed reader looks at them (plan reads them unstructured), and
// they are a fifth of what a conversion costs.
func withoutManagedFields(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	if _, ok := md["managedFields"]; !ok {
		return obj
	}
	md = maps.Clone(md)
	delete(md, "managedFields")
	obj = maps.Clone(obj)
	obj["metadata"] = md
	return obj
}

// AllAs converts objects of a Managed resource (see As).
func AllAs[T any](objs []any) ([]*T, error) {
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		t, err := As[T](o)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
