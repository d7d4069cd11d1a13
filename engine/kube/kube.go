// Package kube connects the engine to a cluster: it loads a kubeconfig the
// way kubectl does, counts the requests sent by verb (benchmarks and the
// provider's debug log report them per resource) and tells the engine's
// view of the cluster about every write, so what the engine wrote is what
// it reads next.
package kube

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Clients are the clients the engine uses, sharing one counted transport.
type Clients struct {
	Dynamic dynamic.Interface
	Typed   kubernetes.Interface
	// Config is what both are built from, its requests counted too: for
	// the view's own list and watch clients.
	Config   *rest.Config
	Requests *Counter
	writes   *observers
}

// OnWrite calls fn after every successful create, update, patch or delete
// the clients send, with what the API server answered.
func (c *Clients) OnWrite(fn func(Write)) { c.writes.add(fn) }

// NewClients builds clients from a REST config; every request they send is
// counted, every write reported to OnWrite's functions.
func NewClients(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	counter, writes := &Counter{}, &observers{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return transport{next: rt, counter: counter, writes: writes}
	})
	if cfg.QPS == 0 {
		// client-go's default of 5 requests a second makes a 1000-object
		// apply take minutes; the API server's own flow control protects it.
		cfg.QPS, cfg.Burst = 100, 200
	}
	// Write responses are read for their resourceVersion: keep them JSON.
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{Dynamic: dyn, Typed: typed, Config: cfg, Requests: counter, writes: writes}, nil
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
