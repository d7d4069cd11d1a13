// Package view is the engine's one view of the cluster. Every read the
// engine makes — plan's live objects and inventories, readback for refresh
// and import, the plan-time checks, capacity, a workload's status and the
// waits — is served by client-go informers that the view starts on first
// use, one per Resource (a kind and the part of the cluster it covers, by
// label or field selector), kept current by their watches. A Terraform run
// (one provider process) or a CLI command therefore lists each kind once
// however many resources it plans, and `gpuslice reconcile` keeps one view
// across its rounds.
//
// Two rules keep it correct:
//
//   - Read your writes. Every write the engine's clients send is reported
//     (kube.Write) and becomes a barrier: a later read of that resource
//     waits until its informer has seen the answer's resourceVersion, or
//     the deletion. A resource applied in a run is what the resources
//     planned after it see.
//   - Fresh per run. A view starts empty, so its first read of a kind
//     lists it as of now; out-of-band changes arrive by watch afterwards,
//     within the watch's latency. Reset starts over, as a new process would.
//
// A namespaced kind is read one namespace at a time, in the namespaces a
// run names (WarmIn, or its first read there), so a run's cost does not
// grow with other tenants' objects; only a resource marked ClusterWide,
// which a check needs from every namespace, is read across them all — and
// without the right to, per namespace read.
//
// The kinds client-go's scheme knows (all but custom resources) are listed
// and watched as protobuf and kept as their client-go type: decoding them
// costs a fraction of JSON into maps, and they take a fraction of the
// memory. Live converts one to unstructured when plan asks for it.
package view

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
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

// View is one engine's cache of the cluster. It is safe for concurrent use.
type View struct {
	client dynamic.Interface
	// config, when set, builds the protobuf clients of the kinds
	// client-go's scheme knows; without it every kind is read through
	// client (the fake dynamic client of small tests).
	config *rest.Config
	rest   map[schema.GroupVersion]rest.Interface // by v.mu

	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelFunc
	closed   bool
	entries  map[entryKey]*entry
	barriers map[schema.GroupResource][]barrier
	seq      uint64 // of the last barrier
	// wg counts the goroutines of this generation's informers; Reset and
	// Close wait for them.
	wg      *sync.WaitGroup
	running atomic.Int64

	subsMu sync.Mutex
	subs   map[chan struct{}]struct{}

	typesState typesState
}

// New returns a view reading through client, and through clients built
// from config (nil for none) the kinds client-go's scheme knows; nothing is
// read until asked.
func New(client dynamic.Interface, config *rest.Config) *View {
	v := &View{client: client, config: config, rest: map[schema.GroupVersion]rest.Interface{}, subs: map[chan struct{}]struct{}{},
		typesState: typesState{docs: map[string]*fetch[*gvTypes]{}}}
	v.reset()
	return v
}

func (v *View) reset() {
	v.ctx, v.cancel = context.WithCancel(context.Background())
	v.entries = map[entryKey]*entry{}
	v.barriers = map[schema.GroupResource][]barrier{}
	v.wg = &sync.WaitGroup{}
}

// Reset stops every informer and waits until they have stopped: the next
// read lists the cluster afresh, as a new process would. Reads running
// meanwhile may fail; call it between runs.
func (v *View) Reset() {
	v.mu.Lock()
	v.cancel()
	stopped := v.wg
	v.reset()
	v.mu.Unlock()
	stopped.Wait()
	v.resetTypes()
}

// Close stops every informer and returns once their goroutines have
// ended; reads fail afterwards.
func (v *View) Close() {
	v.mu.Lock()
	v.cancel()
	v.closed = true
	stopped := v.wg
	v.mu.Unlock()
	stopped.Wait()
}

// Running says how many goroutines the view's informers run: none once
// Close has returned.
func (v *View) Running() int { return int(v.running.Load()) }

// goroutine runs f as one of the current generation's goroutines; v.mu is
// held.
func (v *View) goroutine(f func()) {
	wg := v.wg
	wg.Add(1)
	v.running.Add(1)
	go func() {
		defer wg.Done()
		defer v.running.Add(-1)
		f()
	}()
}

// Started says how many informers run: what a run's reads cost.
func (v *View) Started() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.entries)
}

type entryKey struct {
	res       Resource
	namespace string // "" for all
}

type entry struct {
	key      entryKey
	selector labels.Selector
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	ready    chan struct{} // closed once synced or failed
	once     sync.Once
	err      error

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every event
	settled uint64        // barriers up to this one are in the store
}

func (e *entry) finish(err error) {
	e.once.Do(func() {
		e.err = err
		if err != nil {
			e.stop()
		}
		close(e.ready)
	})
}

func (e *entry) touch() {
	e.mu.Lock()
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

func (e *entry) changes() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

func (e *entry) what() string {
	if e.key.namespace != "" {
		return e.key.res.String() + " in " + e.key.namespace
	}
	return e.key.res.String()
}

var errClosed = errors.New("the engine was closed; create a new one")

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

// entry returns the synced informer of res in namespace ("" for all),
// starting it when none runs, with every barrier that concerns it passed.
func (v *View) entry(ctx context.Context, res Resource, namespace string) (*entry, error) {
	k := entryKey{res: res, namespace: namespace}
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil, errClosed
	}
	e := v.entries[k]
	if e == nil {
		e = v.start(k)
		v.entries[k] = e
	}
	v.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("read %s: %w", e.what(), ctx.Err())
	}
	if e.err != nil {
		if !apierrors.IsForbidden(e.err) {
			v.forget(e) // the next read tries again
		}
		return nil, e.err
	}
	if err := v.settle(ctx, e); err != nil {
		return nil, err
	}
	return e, nil
}

func (v *View) forget(e *entry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.entries[e.key] == e {
		delete(v.entries, e.key)
	}
}

// start runs an informer for k; v.mu is held.
func (v *View) start(k entryKey) *entry {
	e := &entry{key: k, ready: make(chan struct{}), changed: make(chan struct{}), settled: v.seq}
	if sel, err := labels.Parse(k.res.Labels); err == nil {
		e.selector = sel
	} else {
		e.selector = labels.Everything()
	}
	tweak := func(o *metav1.ListOptions) { o.LabelSelector, o.FieldSelector = k.res.Labels, k.res.Fields }
	var inf cache.SharedIndexInformer
	if lw, example := v.typedListWatch(k, tweak); lw != nil {
		inf = cache.NewSharedIndexInformer(lw, example, 0, indexers)
	} else {
		inf = dynamicinformer.NewFilteredDynamicInformer(v.client, k.res.GVR, k.namespace, 0, indexers, tweak).Informer()
	}
	ctx, cancel := context.WithCancel(v.ctx)
	e.informer, e.stop = inf, cancel
	_ = inf.SetTransform(transform(k.res))
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		select {
		case <-e.ready:
			cache.DefaultWatchErrorHandler(ctx, r, err) // the reflector lists and watches again
		default:
			// Not synced yet: say why now rather than retry in the background.
			e.finish(fmt.Errorf("read %s: %w", e.what(), err))
		}
	})
	subs := func() {
		e.touch()
		v.broadcast()
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { subs() },
		UpdateFunc: func(any, any) { subs() },
		DeleteFunc: func(any) { subs() },
	})
	v.goroutine(func() { inf.RunWithContext(ctx) })
	v.goroutine(func() {
		select {
		case <-inf.HasSyncedChecker().Done():
			e.finish(nil)
		case <-ctx.Done():
			e.finish(fmt.Errorf("read %s: %w", e.what(), errClosed))
		}
	})
	return e
}

// typedListWatch lists and watches k as protobuf into its client-go type,
// with an object of that type; nil when the view has no config or the
// scheme does not know the kind (a custom resource).
func (v *View) typedListWatch(k entryKey, tweak func(*metav1.ListOptions)) (cache.ListerWatcher, runtime.Object) {
	gvk := k.res.GVR.GroupVersion().WithKind(k.res.Kind)
	if v.config == nil || !scheme.Scheme.Recognizes(gvk) {
		return nil, nil
	}
	example, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, nil
	}
	client := v.rest[gvk.GroupVersion()]
	if client == nil {
		cfg := rest.CopyConfig(v.config)
		gv := gvk.GroupVersion()
		cfg.GroupVersion, cfg.APIPath = &gv, "/apis"
		if gv.Group == "" {
			cfg.APIPath = "/api"
		}
		cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
		if client, err = rest.RESTClientFor(cfg); err != nil {
			return nil, nil // read it unstructured then
		}
		v.rest[gv] = client
	}
	return cache.NewFilteredListWatchFromClient(client, k.res.GVR.Resource, k.namespace, tweak), example
}

// transform stores typed resources as their client-go type (without
// managedFields, which only plan reads), keeps what came typed so, and
// makes sure every object carries its kind (items of a list do not).
func transform(res Resource) cache.TransformFunc {
	gvk := res.GVR.GroupVersion().WithKind(res.Kind)
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			if o, ok := obj.(runtime.Object); ok {
				o.GetObjectKind().SetGroupVersionKind(gvk)
				if m, err := meta.Accessor(o); err == nil && res.Typed {
					m.SetManagedFields(nil)
				}
			}
			return obj, nil
		}
		if u.GetKind() == "" {
			u.SetGroupVersionKind(gvk)
		}
		if !res.Typed {
			return u, nil
		}
		typed, err := scheme.Scheme.New(gvk)
		if err != nil {
			return nil, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(withoutManagedFields(u.Object), typed); err != nil {
			return nil, fmt.Errorf("read %s %s/%s: %w", res.Kind, u.GetNamespace(), u.GetName(), err)
		}
		return typed, nil
	}
}

// Subscribe returns a channel that receives (coalesced) whenever any
// informer sees a change, and a function ending the subscription.
func (v *View) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	v.subsMu.Lock()
	v.subs[ch] = struct{}{}
	v.subsMu.Unlock()
	return ch, func() {
		v.subsMu.Lock()
		delete(v.subs, ch)
		v.subsMu.Unlock()
	}
}

func (v *View) broadcast() {
	v.subsMu.Lock()
	defer v.subsMu.Unlock()
	for ch := range v.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
