package view

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// entryKey names one informer the view runs: a resource, in one namespace
// or ("") in all of them.
type entryKey struct {
	res       Resource
	namespace string // "" for all
}

// entry is one informer, from its start through its sync to its stop, with
// what the barriers and waiters of its reads need.
type entry struct {
	key      entryKey
	selector labels.Selector
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	ready    chan struct{} // closed once synced or failed
	once     sync.Once
	err      error

	indexMu sync.Mutex      // adding an index
	indexed map[string]bool // the indexes the informer keeps

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
	var start cache.Indexers
	start, e.indexed = startIndexers(k)
	if lw, example := v.typedListWatch(k, tweak); lw != nil {
		inf = cache.NewSharedIndexInformer(lw, example, 0, start)
	} else {
		inf = dynamicinformer.NewFilteredDynamicInformer(v.client, k.res.GVR, k.namespace, 0, start, tweak).Informer()
	}
	ctx, cancel := context.WithCancel(v.ctx)
	e.informer, e.stop = inf, cancel
	_ = inf.SetTransform(transform(k.res))
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		select {
		case <-e.ready:
			if ctx.Err() != nil {
				// The view is stopping (the command ends): a watch cut by
				// that is no error, and a line on stderr after a plan's
				// JSON would spoil it for whoever reads both streams.
				return
			}
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
	return listWatch(client, k.res.GVR.Resource, k.namespace, tweak, v.follow), example
}

// listWatch lists compressed, as client-go does, but watches uncompressed:
// after its list a watch carries only changes, a few small events, while
// each compressed stream holds a decompressor with its 32 KiB window for
// as long as it runs (one per informer: 2 MiB of a plan of 1000 workloads
// in 10 namespaces). The list is a LIST, not client-go's streaming watch
// list, which would carry the initial objects uncompressed too: a
// namespace of 100 workloads lists 24 KiB compressed, 414 KiB not.
//
// The watch opens once follow is closed (View.Follow): a run that only
// reads sends one request per informer, its list, and reads the cluster as
// of it. A watch opened later starts from the list's resourceVersion, so
// it delivers every change since; one the API server no longer holds
// (410 Gone) makes the reflector list again.
func listWatch(c rest.Interface, resource, namespace string, tweak func(*metav1.ListOptions), follow <-chan struct{}) cache.ListerWatcher {
	req := func(options metav1.ListOptions) *rest.Request {
		tweak(&options)
		return c.Get().Namespace(namespace).Resource(resource).VersionedParams(&options, metav1.ParameterCodec)
	}
	return listThenWatch{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			// A list must show every write made before it: the view's
			// barriers for its own writes go with a Reset, and others'
			// writes are certain to show after Refresh. client-go's first
			// list asks for "0", which the API server may answer from a
			// cache that lags; "" is a consistent read (WatchList's initial
			// events are too).
			if options.ResourceVersion == "0" {
				options.ResourceVersion = ""
			}
			return req(options).Do(ctx).Get()
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			select {
			case <-follow:
			case <-ctx.Done(): // the informer stops
				return nil, ctx.Err()
			}
			options.Watch = true
			return req(options).SetHeader("Accept-Encoding", "identity").Watch(ctx)
		},
	}}
}

// listThenWatch tells client-go's reflector to list, then watch, rather
// than stream the initial objects over the watch.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// transform stores typed resources as their client-go type (without
// managedFields, which only plan reads), keeps what came typed so, and
// makes sure every object carries its kind (items of a list do not). Of
// the managedFields it keeps, only gpuslice's own say which fields: of
// other managers the plan and apply read only the name and operation.
// The objects of the kinds gpuslice applies, which plan reads once each,
// are kept encoded (objects.Encoded) and decoded when read.
func transform(res Resource) cache.TransformFunc {
	gvk := res.GVR.GroupVersion().WithKind(res.Kind)
	return func(obj any) (any, error) {
		if _, done := obj.(*objects.Encoded); done {
			return obj, nil
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			o, ok := obj.(runtime.Object)
			if !ok {
				return obj, nil
			}
			o.GetObjectKind().SetGroupVersionKind(gvk)
			m, err := meta.Accessor(o)
			if err != nil {
				return obj, nil
			}
			if res.Typed {
				m.SetManagedFields(nil)
				return obj, nil
			}
			onlyOwnFields(m)
			e, encoded, err := objects.Encode(o, gvk, indexedLabels...)
			switch {
			case err != nil:
				return nil, err
			case encoded:
				return e, nil
			}
			return obj, nil
		}
		if u.GetKind() == "" {
			u.SetGroupVersionKind(gvk)
		}
		if !res.Typed {
			onlyOwnFields(u)
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

// onlyOwnFields drops the field sets of managers other than gpuslice's
// apply: the largest is the controller's for status, rewritten at every
// rollout and never read here.
func onlyOwnFields(m metav1.Object) {
	mfs := m.GetManagedFields()
	trimmed := false
	for i := range mfs {
		if mfs[i].Manager != objects.FieldManager && mfs[i].FieldsV1 != nil {
			mfs[i].FieldsV1 = nil
			trimmed = true
		}
	}
	if trimmed {
		m.SetManagedFields(mfs) // an unstructured object's are a copy
	}
}
