package view

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// A list may be large and is worth compressing; a watch after it carries a
// few small events, and a compressed one holds a decompressor for as long
// as it runs.
func TestWatchesUncompressedListsCompressed(t *testing.T) {
	var mu sync.Mutex
	encodings := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		encodings[r.URL.Query().Get("watch")] = r.Header.Get("Accept-Encoding")
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
	lw := listWatch(client, "services", "ns", func(*metav1.ListOptions) {})
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	mu.Lock()
	defer mu.Unlock()
	if got := encodings[""]; got != "gzip" {
		t.Errorf("list asked for Accept-Encoding %q, want gzip", got)
	}
	if got := encodings["true"]; got != "identity" {
		t.Errorf("watch asked for Accept-Encoding %q, want identity", got)
	}
}
