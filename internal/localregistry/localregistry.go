// Package localregistry serves OCI images to the local cluster's real nodes
// the way a user's cluster gets them: pulled by containerd from a registry.
// It is go-containerregistry's registry on a loopback port, started with
// the cluster; nodes send pulls of the name Host to it (containerd's
// hosts.toml), so image references stay the same from run to run.
package localregistry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Host is the registry name images of the local cluster carry. The .test
// top-level domain never resolves, so nothing outside can answer for it.
const Host = "registry.gpuslice.test"

// Registry is a running registry.
type Registry struct {
	// URL is where it listens, e.g. http://127.0.0.1:41234.
	URL string
	// CertPEM is the certificate of a registry served over HTTPS
	// (StartTLS), for its clients to trust; empty over HTTP.
	CertPEM   []byte
	server    *http.Server
	transport http.RoundTripper
	done      chan error
}

// Start serves an empty registry on a free loopback port.
func Start() (*Registry, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("local registry: %w", err)
	}
	r := newRegistry("http://" + ln.Addr().String())
	go func() { r.done <- r.server.Serve(ln) }()
	return r, nil
}

func newRegistry(url string) *Registry {
	return &Registry{
		URL:       url,
		server:    &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second},
		transport: remote.DefaultTransport,
		done:      make(chan error, 1),
	}
}

// Addr is the registry's host:port, as image references name it.
func (r *Registry) Addr() string {
	_, addr, _ := strings.Cut(r.URL, "://")
	return addr
}

// Transport is an HTTP transport that trusts the registry.
func (r *Registry) Transport() http.RoundTripper { return r.transport }

// Mirrors is what nodes need to pull from it: registry name → URL.
func (r *Registry) Mirrors() map[string]string { return map[string]string{Host: r.URL} }

// Push stores img under ref, a reference on Host (e.g.
// registry.gpuslice.test/slice-check:1), and returns its digest.
func (r *Registry) Push(ctx context.Context, ref string, img v1.Image) (v1.Hash, error) {
	repoTag, ok := strings.CutPrefix(ref, Host+"/")
	if !ok {
		return v1.Hash{}, fmt.Errorf("image %s: the local registry serves %s/… only", ref, Host)
	}
	target, err := name.ParseReference(r.Addr()+"/"+repoTag, name.Insecure)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Write(target, img, remote.WithContext(ctx), remote.WithTransport(r.transport)); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s to the local registry: %w", ref, err)
	}
	return img.Digest()
}

// Stop stops serving.
func (r *Registry) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.server.Shutdown(ctx)
	if serveErr := <-r.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
