// Package fluxtest runs Flux's source-controller for tests, as a cluster
// with Flux has it: the real binary (bin/source-controller, built by `make
// tools` from its Go module) watching the local control plane, with its
// CRDs installed and its artifacts served through a proxy the test can
// make forge them.
package fluxtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/freeport"
	"github.com/gpuslice/gpuslice/internal/proc/proctest"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// The Flux sources' resources (source-controller v1.x serves v1).
var (
	GitRepositories = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	OCIRepositories = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}
)

// Flux is a running source-controller.
type Flux struct {
	Dyn dynamic.Interface
	// Forged, when set, is served instead of every artifact.
	Forged atomic.Pointer[[]byte]
	// Downloads counts the artifact requests.
	Downloads atomic.Int32
}

// Start installs source-controller's CRDs, creates namespace ns and
// starts source-controller with its storage in a temporary directory; at
// the end of t it deletes the sources in ns while source-controller still
// runs (they carry its finalizer), then stops it by PID.
func Start(t *testing.T, c *cluster.Cluster, ns string) *Flux {
	t.Helper()
	bin := filepath.Join(cluster.FindBinDir(), "source-controller")
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "needs Flux's source-controller, which `make tools` builds (tools/build.sh source-controller): %v", err)
	}
	clustertest.ServeCRD(t, c.RESTConfig(), clustertest.FluxSources...)
	f := &Flux{Dyn: dynamic.NewForConfigOrDie(c.RESTConfig())}
	ctx := context.Background()
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	storage := FreeAddr(t)
	target, _ := url.Parse("http://" + storage)
	upstream := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.Downloads.Add(1)
		if b := f.Forged.Load(); b != nil {
			_, _ = w.Write(*b)
			return
		}
		upstream.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	cmd := exec.Command(bin, "--storage-path="+t.TempDir(), "--storage-addr="+storage, "--storage-adv-addr="+strings.TrimPrefix(proxy.URL, "http://"),
		"--metrics-addr=0", "--health-addr=0", "--enable-leader-election=false", "--events-addr=", "--log-encoding=console")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath)
	out, exited := proctest.Start(t, cmd)
	t.Cleanup(func() {
		select {
		case <-exited:
			t.Errorf("source-controller exited before the test's end (%s)", cmd.ProcessState)
		default:
		}
		if t.Failed() {
			t.Logf("source-controller's output:\n%s", tail(out.String(), 60))
		}
	})
	t.Cleanup(func() { f.deleteAll(t, ns) })
	return f
}

// deleteAll removes the sources in ns and waits until source-controller
// has let them go.
func (f *Flux) deleteAll(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, gvr := range []schema.GroupVersionResource{GitRepositories, OCIRepositories} {
		r := f.Dyn.Resource(gvr).Namespace(ns)
		if err := r.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("delete the %s in %s: %v", gvr.Resource, ns, err)
			continue
		}
		lw := &cache.ListWatch{
			ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, o) },
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return r.Watch(ctx, o) },
		}
		left := map[string]bool{}
		_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, func(store cache.Store) (bool, error) {
			return len(store.List()) == 0, nil
		}, func(ev watch.Event) (bool, error) {
			name := ev.Object.(*unstructured.Unstructured).GetName()
			left[name] = ev.Type != watch.Deleted
			for _, l := range left {
				if l {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Errorf("the %s in %s are still there: %v (%v)", gvr.Resource, ns, err, left)
		}
	}
}

// Create creates a Flux source object.
func (f *Flux) Create(t *testing.T, gvr schema.GroupVersionResource, obj map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	if _, err := f.Dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s/%s: %v", gvr.Resource, u.GetNamespace(), u.GetName(), err)
	}
}

// WaitSource watches a Flux source until cond holds for it.
func (f *Flux) WaitSource(t *testing.T, gvr schema.GroupVersionResource, ns, name, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := f.Dyn.Resource(gvr).Namespace(ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return r.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return r.Watch(ctx, o)
		},
	}
	var last *unstructured.Unstructured
	ev, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		last = ev.Object.(*unstructured.Unstructured)
		return ev.Type != watch.Deleted && cond(last), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s (%s %s/%s): %v; last status: %v", what, gvr.Resource, ns, name, err, last.Object["status"])
	}
	return ev.Object.(*unstructured.Unstructured)
}

// ArtifactRevision is a source's status.artifact.revision.
func ArtifactRevision(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "revision")
	return s
}

// FreeAddr is a loopback address no one listens on now, for a process the
// test starts to bind (see package freeport for why not port 0).
func FreeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// TarGz is a gzipped tarball of files, as source-controller writes one.
func TarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// GitRepository is a GitRepository following branch main of url.
func GitRepository(ns, name, url, interval string) map[string]any {
	return map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"url": url, "interval": interval, "ref": map[string]any{"branch": "main"}},
	}
}
