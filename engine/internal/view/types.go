package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The API server's schemas, which plan's diff compares objects with: the
// OpenAPI v3 document of each group-version (GET
// /openapi/v3/apis/<group>/<version>), fetched when first asked for, as
// structured-merge-diff types. The index of documents (GET /openapi/v3)
// is read once per run, like the informers' lists; a document is fetched
// and parsed once per version the server publishes (its URL carries a
// hash of it), so a run that plans many resources pays for each
// group-version once, and a continuous view only for those that changed.

// gvTypes is the API server's schema of the kinds of one group-version.
type gvTypes struct {
	managedfields.TypeConverter
	kinds map[string]bool
}

func (t *gvTypes) has(kind string) bool { return t.kinds[kind] }

// typesState is the view's part for schemas; its fields are guarded by
// mu, which is never held while taking View.mu's.
type typesState struct {
	mu     sync.Mutex
	client openapi.ClientWithContext
	index  *fetch[map[string]openapi.GroupVersionWithContext] // this run's
	docs   map[string]*fetch[*gvTypes]                        // by URL, across runs
}

// fetch is one request's result, shared by the readers that wait for it.
type fetch[T any] struct {
	done chan struct{}
	val  T
	err  error
}

func (f *fetch[T]) wait(ctx context.Context) (T, error) {
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// WarmTypes starts fetching the schemas of gvs without waiting.
func (v *View) WarmTypes(gvs ...schema.GroupVersion) {
	if v.config == nil {
		return
	}
	for _, gv := range gvs {
		v.spawn(func(ctx context.Context) { _, _ = v.Types(ctx, gv.WithKind("")) })
	}
}

// Go runs f beside the caller as one of the view's goroutines, with a
// context that ends when the view is reset or closed (which wait for it).
func (v *View) Go(f func(ctx context.Context)) { v.spawn(f) }

// spawn runs f as one of the current generation's goroutines, with its
// context; false when the view is closed.
func (v *View) spawn(f func(ctx context.Context)) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return false
	}
	ctx := v.ctx
	v.goroutine(func() { f(ctx) })
	return true
}

// Types returns the API server's schema of gvk's group-version, which has
// gvk's kind (any kind when gvk.Kind is ""). A kind the server serves but
// does not yet publish (its CRD installed moments ago) is looked for once
// more in a fresh index before Types gives up.
func (v *View) Types(ctx context.Context, gvk schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	gv := gvk.GroupVersion()
	t, err := v.types(ctx, gv, false)
	if err == nil && gvk.Kind != "" && !t.has(gvk.Kind) || errors.Is(err, errNotPublished) {
		t, err = v.types(ctx, gv, true)
	}
	if err != nil {
		return nil, err
	}
	if gvk.Kind != "" && !t.has(gvk.Kind) {
		return nil, fmt.Errorf("the API server's OpenAPI v3 schema of %s has no kind %s yet: if its CRD was installed moments ago, plan again", gv, gvk.Kind)
	}
	return t, nil
}

var errNotPublished = errors.New("not published")

// types returns the schema of gv; fresh reads the index again first.
func (v *View) types(ctx context.Context, gv schema.GroupVersion, fresh bool) (*gvTypes, error) {
	if v.config == nil {
		return nil, fmt.Errorf("no schema of %s: the view has no client configuration; this is a bug in gpuslice", gv)
	}
	index, err := v.typesIndex(fresh).wait(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's OpenAPI v3 index (/openapi/v3): %w; gpuslice compares objects with the schemas the API server publishes (Kubernetes 1.27 or later)", err)
	}
	path := "apis/" + gv.String()
	if gv.Group == "" {
		path = "api/" + gv.Version
	}
	doc, ok := index[path]
	if !ok {
		return nil, fmt.Errorf("the API server publishes no OpenAPI v3 schema of %s (/openapi/v3/%s): %w; if its CRD was installed moments ago, plan again", gv, path, errNotPublished)
	}
	url := doc.ServerRelativeURL()
	ts := &v.typesState
	ts.mu.Lock()
	f, started := ts.docs[url], false
	if f == nil {
		f, started = &fetch[*gvTypes]{done: make(chan struct{})}, true
		ts.docs[url] = f
	}
	ts.mu.Unlock()
	if started {
		// With the view's context, not the caller's: it serves every reader.
		ok := v.spawn(func(ctx context.Context) {
			defer close(f.done)
			if f.val, f.err = parseTypes(ctx, gv, doc); f.err != nil {
				f.err = fmt.Errorf("read the API server's OpenAPI v3 schema of %s (%s): %w", gv, url, f.err)
				ts.forget(url, f)
			}
		})
		if !ok {
			f.err = errClosed
			close(f.done)
			ts.forget(url, f)
		}
	}
	return f.wait(ctx)
}

// forget drops a failed fetch, so that the next reader tries again.
func (ts *typesState) forget(url string, f *fetch[*gvTypes]) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.docs[url] == f {
		delete(ts.docs, url)
	}
}

// typesIndex returns this run's index of OpenAPI documents, fetching it
// when the run has none or fresh is set.
func (v *View) typesIndex(fresh bool) *fetch[map[string]openapi.GroupVersionWithContext] {
	ts := &v.typesState
	ts.mu.Lock()
	if f := ts.index; f != nil {
		select {
		case <-f.done:
			if !fresh {
				ts.mu.Unlock()
				return f
			}
		default:
			ts.mu.Unlock()
			return f // a fetch under way is fresh enough
		}
	}
	f := &fetch[map[string]openapi.GroupVersionWithContext]{done: make(chan struct{})}
	if ts.client == nil {
		d, err := discovery.NewDiscoveryClientForConfig(v.config)
		if err != nil {
			ts.mu.Unlock()
			f.err = err
			close(f.done)
			return f
		}
		ts.client = openapi.ToClientWithContext(d.OpenAPIV3())
	}
	ts.index = f
	client := ts.client
	ts.mu.Unlock()
	failed := func() {
		ts.mu.Lock()
		if ts.index == f {
			ts.index = nil // the next reader tries again
		}
		ts.mu.Unlock()
	}
	ok := v.spawn(func(ctx context.Context) {
		defer close(f.done)
		if f.val, f.err = client.PathsWithContext(ctx); f.err != nil {
			failed()
		}
	})
	if !ok {
		f.err = errClosed
		close(f.done)
		failed()
	}
	return f
}

// resetTypes starts a new run: the next reader reads the index again.
func (v *View) resetTypes() {
	v.typesState.mu.Lock()
	v.typesState.index = nil
	v.typesState.mu.Unlock()
}

// parseTypes fetches and converts one group-version's document. Only its
// schemas are decoded (the paths, half of it, are skipped).
func parseTypes(ctx context.Context, gv schema.GroupVersion, doc openapi.GroupVersionWithContext) (*gvTypes, error) {
	data, err := doc.SchemaWithContext(ctx, "application/json")
	if err != nil {
		return nil, err
	}
	var only struct {
		Components struct {
			Schemas map[string]*spec.Schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &only); err != nil {
		return nil, err
	}
	tc, err := managedfields.NewTypeConverter(only.Components.Schemas, false)
	if err != nil {
		return nil, err
	}
	t := &gvTypes{TypeConverter: tc, kinds: map[string]bool{}}
	for _, s := range only.Components.Schemas {
		gvks, _ := s.Extensions["x-kubernetes-group-version-kind"].([]any)
		for _, x := range gvks {
			m, _ := x.(map[string]any)
			if m["group"] == gv.Group && m["version"] == gv.Version {
				if k, ok := m["kind"].(string); ok {
					t.kinds[k] = true
				}
			}
		}
	}
	return t, nil
}
