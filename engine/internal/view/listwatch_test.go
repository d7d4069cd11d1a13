package view

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// A list may be large and is worth compressing (repeated workloads
// compress 17 to 1); a watch after it carries a few small events, and a
// compressed one holds a decompressor for as long as it runs. The initial
// objects come by a list, not streamed over the watch, and a consistent
// one. The watch waits until the view follows the cluster: a run that only
// reads sends nothing but its lists.
func TestWatchesUncompressedListsCompressed(t *testing.T) {
	var mu sync.Mutex
	encodings := map[string]string{}
	var listVersion []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		encodings[r.URL.Query().Get("watch")] = r.Header.Get("Accept-Encoding")
		if r.URL.Query().Get("watch") == "" {
			listVersion = r.URL.Query()["resourceVersion"]
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			return // an empty stream: the watch ends
		}
		_, _ = w.Write([]byte(`{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
	}))
	defer srv.Close()
	gv := schema.GroupVersion{Version: "v1"}
	client, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, APIPath: "/api", ContentConfig: rest.ContentConfig{
		GroupVersion: &gv, NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	follow := make(chan struct{})
	lw := listWatch(client, "services", "ns", func(*metav1.ListOptions) {}, follow)
	if !watchlist.DoesClientNotSupportWatchListSemantics(lw) {
		t.Error("the reflector would stream the initial objects over the uncompressed watch")
	}
	lwc := cache.ToListerWatcherWithContext(lw)
	// client-go's first list asks for "0": any version, which a lagging
	// cache may answer.
	if _, err := lwc.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"}); err != nil {
		t.Fatal(err)
	}
	// The informer stops before the view follows. (Were the watch not
	// held back, it would reach the server well within this time.)
	stopped, stop := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer stop()
	if _, err := lwc.WatchWithContext(stopped, metav1.ListOptions{ResourceVersion: "1"}); err == nil {
		t.Fatal("a watch opened before the view follows the cluster")
	}
	mu.Lock()
	if _, watched := encodings["true"]; watched {
		t.Error("the watch reached the API server before the view follows the cluster")
	}
	mu.Unlock()
	close(follow)
	w, err := lwc.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(listVersion) != 0 && listVersion[0] != "" {
		t.Errorf("list asked for resourceVersion %q, want a consistent read (none)", listVersion[0])
	}
	if got := encodings[""]; got != "gzip" {
		t.Errorf("list asked for Accept-Encoding %q, want gzip", got)
	}
	if got := encodings["true"]; got != "identity" {
		t.Errorf("watch asked for Accept-Encoding %q, want identity", got)
	}
}
