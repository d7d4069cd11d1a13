package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Counter counts API requests by verb.
type Counter struct {
	list, watch, get, create, update, patch, delete atomic.Int64
}

// Counts are requests sent, by verb as the API server's metrics name them
// (a GET of a collection is a LIST, with watch=true a WATCH).
type Counts struct {
	List   int64 `json:"list"`
	Watch  int64 `json:"watch"`
	Get    int64 `json:"get"`
	Create int64 `json:"create"`
	Update int64 `json:"update"`
	Patch  int64 `json:"patch"`
	Delete int64 `json:"delete"`
}

// Reads are the requests that read: lists, watches and gets.
func (c Counts) Reads() int64 { return c.List + c.Watch + c.Get }

// Total is every request.
func (c Counts) Total() int64 { return c.Reads() + c.Create + c.Update + c.Patch + c.Delete }

// Sub returns c minus an earlier reading.
func (c Counts) Sub(before Counts) Counts {
	return Counts{List: c.List - before.List, Watch: c.Watch - before.Watch, Get: c.Get - before.Get, Create: c.Create - before.Create,
		Update: c.Update - before.Update, Patch: c.Patch - before.Patch, Delete: c.Delete - before.Delete}
}

func (c Counts) String() string {
	return fmt.Sprintf("list=%d watch=%d get=%d create=%d update=%d patch=%d delete=%d", c.List, c.Watch, c.Get, c.Create, c.Update, c.Patch, c.Delete)
}

// Count returns the number of requests so far.
func (c *Counter) Count() int64 { return c.Counts().Total() }

// Counts returns the requests so far by verb.
func (c *Counter) Counts() Counts {
	return Counts{List: c.list.Load(), Watch: c.watch.Load(), Get: c.get.Load(), Create: c.create.Load(),
		Update: c.update.Load(), Patch: c.patch.Load(), Delete: c.delete.Load()}
}

// Write is one change the engine made, as the API server answered it.
type Write struct {
	Resource        schema.GroupResource
	Namespace, Name string
	// ResourceVersion of the object in the answer.
	ResourceVersion string
	Labels          map[string]string
	// Deleted: a DELETE; the object is gone, or Terminating when the answer
	// carries a deletionTimestamp (finalizers still run).
	Deleted, Terminating bool
}

type observers struct {
	mu  sync.Mutex
	fns []func(Write)
}

func (o *observers) add(fn func(Write)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fns = append(o.fns, fn)
}

func (o *observers) tell(w Write) {
	o.mu.Lock()
	fns := o.fns
	o.mu.Unlock()
	for _, fn := range fns {
		fn(w)
	}
}

type transport struct {
	next    http.RoundTripper
	counter *Counter
	writes  *observers
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	path, named := parsePath(req.URL.Path)
	write := false
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			t.counter.watch.Add(1)
		case named:
			t.counter.get.Add(1)
		default:
			t.counter.list.Add(1)
		}
	case http.MethodPost:
		t.counter.create.Add(1)
		write = true
	case http.MethodPut:
		t.counter.update.Add(1)
		write = true
	case http.MethodPatch:
		t.counter.patch.Add(1)
		write = true
	case http.MethodDelete:
		t.counter.delete.Add(1)
		write = true
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || !write || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp, nil // the client reports the short body itself
	}
	if w, ok := written(path, req.Method, body); ok {
		t.writes.tell(w)
	}
	return resp, nil
}

// apiPath is what a request's URL path names.
type apiPath struct {
	resource        schema.GroupResource
	namespace, name string
	subresource     string
}

// parsePath reads /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] and
// /apis/GROUP/VERSION/…; named is false for collections (and for paths it
// does not know, which then count as lists).
func parsePath(p string) (apiPath, bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return apiPath{}, false
	}
	var out apiPath
	namespaceItself := len(parts) == 3 && (parts[2] == "status" || parts[2] == "finalize")
	if parts[0] == "namespaces" && len(parts) >= 3 && !namespaceItself {
		out.namespace, parts = parts[1], parts[2:]
	}
	out.resource = schema.GroupResource{Group: group, Resource: parts[0]}
	if len(parts) >= 2 {
		out.name = parts[1]
	}
	if len(parts) >= 3 {
		out.subresource = parts[2]
	}
	return out, out.name != ""
}

// written reads a write's answer: the object (or, for some deletes, a
// Status naming it).
func written(p apiPath, method string, body []byte) (Write, bool) {
	var obj struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name              string            `json:"name"`
			Namespace         string            `json:"namespace"`
			ResourceVersion   string            `json:"resourceVersion"`
			Labels            map[string]string `json:"labels"`
			DeletionTimestamp *string           `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return Write{}, false
	}
	w := Write{Resource: p.resource, Namespace: p.namespace, Name: obj.Metadata.Name, ResourceVersion: obj.Metadata.ResourceVersion,
		Labels: obj.Metadata.Labels, Deleted: method == http.MethodDelete, Terminating: obj.Metadata.DeletionTimestamp != nil}
	if obj.Kind == "Status" || w.Name == "" {
		w.Name, w.ResourceVersion, w.Labels = p.name, "", nil
	}
	if w.Name == "" {
		return Write{}, false // a collection delete: nothing the engine sends
	}
	return w, true
}
