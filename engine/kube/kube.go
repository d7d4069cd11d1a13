// Package kube connects the engine to a cluster: it loads a kubeconfig the
// way kubectl does and counts the requests sent, so benchmarks can report
// API requests per object.
package kube

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Clients are the clients the engine uses, sharing one counted transport.
type Clients struct {
	Dynamic  dynamic.Interface
	Typed    kubernetes.Interface
	Requests *Counter
}

// Counter counts API requests.
type Counter struct{ n atomic.Int64 }

// Count returns the number of requests so far.
func (c *Counter) Count() int64 { return c.n.Load() }

type countingTransport struct {
	next    http.RoundTripper
	counter *Counter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.counter.n.Add(1)
	return t.next.RoundTrip(req)
}

// NewClients builds clients from a REST config; every request they send is
// counted.
func NewClients(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	counter := &Counter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, counter: counter} })
	if cfg.QPS == 0 {
		// client-go's default of 5 requests a second makes a 1000-object
		// apply take minutes; the API server's own flow control protects it.
		cfg.QPS, cfg.Burst = 100, 200
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{Dynamic: dyn, Typed: typed, Requests: counter}, nil
}

// Load reads a kubeconfig like kubectl: the given path, else $KUBECONFIG,
// else ~/.kube/config; context selects a context other than the current
// one.
func Load(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w (point --kubeconfig or KUBECONFIG at your cluster's kubeconfig; for a local one run `gpuslice dev up`)", err)
	}
	return cfg, nil
}
