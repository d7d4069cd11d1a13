package incluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"helm.sh/helm/v4/pkg/strvals"

	"github.com/gpuslice/gpuslice/deploy"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/localregistry"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// guide is the page whose `helm upgrade --install` the test runs.
const guide = "../../templates/guides/in-cluster-reconcile.md"

// The guide's example repository and registry, replaced by this machine's.
const (
	exampleGitURL   = "https://git.example.com/platform/gpu-stacks.git"
	exampleRegistry = "registry.example.com"
)

// helmInstall reads the guide's snippet marked <!-- reconcile-test: helm -->
// and returns the namespace and values of its `helm upgrade --install`
// (--set parsed by Helm's own parser), with gitURL and the registry in
// place of the example's.
func helmInstall(t *testing.T, gitURL string) (string, map[string]any) {
	t.Helper()
	data, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- reconcile-test: helm -->\n")
	if !ok {
		t.Fatalf("%s has no snippet marked <!-- reconcile-test: helm -->", guide)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the opening fence
	body, _, closed := strings.Cut(rest, "```")
	if !closed {
		t.Fatalf("%s: the helm snippet is not a fenced block", guide)
	}
	body = strings.NewReplacer(exampleGitURL, gitURL, exampleRegistry, localregistry.Host, "\\\n", " ").Replace(body)
	for _, line := range strings.Split(body, "\n") {
		args := strings.Fields(line)
		if len(args) < 5 || args[0] != "helm" || args[1] != "upgrade" || args[2] != "--install" {
			continue
		}
		if args[4] != "deploy/helm/"+deploy.ChartName {
			t.Fatalf("%s installs %s, not the chart deploy/helm/%s", guide, args[4], deploy.ChartName)
		}
		namespace, values := "default", map[string]any{}
		for i := 5; i+1 < len(args); i++ {
			switch args[i] {
			case "-n", "--namespace":
				namespace = args[i+1]
			case "--set":
				if err := strvals.ParseInto(args[i+1], values); err != nil {
					t.Fatalf("%s: --set %s: %v", guide, args[i+1], err)
				}
			}
		}
		return namespace, values
	}
	t.Fatalf("%s: the helm snippet has no helm upgrade --install", guide)
	return "", nil
}

// localValues are what this cluster needs on top of the guide's: the node
// plugin's image from the local registry with a simulated V100 (its pod
// uses the host's network, where the API server is on loopback) and a
// short interval, so that the test's rounds come quickly.
func localValues(env *realnodetest.Env, values map[string]any, nodePluginImage string, interval time.Duration) {
	repo, rest, _ := strings.Cut(nodePluginImage, ":")
	tag, digest, _ := strings.Cut(rest, "@")
	port := env.Cluster.Host[strings.LastIndex(env.Cluster.Host, ":")+1:]
	values["image"] = map[string]any{"repository": repo, "tag": tag, "digest": digest}
	values["driverRoot"] = realnode.DriverRoot
	values["simulatedGPUs"] = "v100-32gb:1"
	values["env"] = map[string]any{"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port}
	values["reconcile"].(map[string]any)["interval"] = interval.String()
}

// pushReconcileImage pushes the image `make image` built
// (bin/image/reconcile/oci) to the nodes' registry as repository:0.1.0,
// the chart's default tag.
func pushReconcileImage(t *testing.T, env *realnodetest.Env, repository string) {
	t.Helper()
	img, err := images.Built(filepath.Join(env.BinDir, "image", "reconcile", "oci"), "the reconciler's image")
	if errors.Is(err, fs.ErrNotExist) {
		testenv.Unavailable(t, "reconcile image: %v (make image)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Registry.Push(context.Background(), repository+":0.1.0", img); err != nil {
		t.Fatal(err)
	}
}

// chart creates the chart's objects as `helm install` does, and deletes
// them (in reverse, pods in the foreground) when the test ends.
type chart struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	objs   []*unstructured.Unstructured
}

func install(t *testing.T, env *realnodetest.Env, namespace string, values map[string]any) *chart {
	t.Helper()
	typed, err := deploy.Render(namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	cfg := env.Cluster.RESTConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &chart{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Cluster.Client().Discovery()))}
	for _, o := range typed {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		res, err := c.resource(u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		c.objs = append(c.objs, u)
	}
	return c
}

func (c *chart) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	if u.GetNamespace() == "" {
		return c.dyn.Resource(m.Resource), nil
	}
	return c.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
}

// remove deletes the objects install created that match (all when match
// is nil), last first, each gone before the next: a Deployment's or
// DaemonSet's pods first (foreground).
func (c *chart) remove(t *testing.T, match func(*unstructured.Unstructured) bool) {
	t.Helper()
	ctx := context.Background()
	var kept []*unstructured.Unstructured
	for i := len(c.objs) - 1; i >= 0; i-- {
		u := c.objs[i]
		if match != nil && !match(u) {
			kept = append([]*unstructured.Unstructured{u}, kept...)
			continue
		}
		res, err := c.resource(u)
		if err != nil {
			t.Error(err)
			continue
		}
		if err := res.Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
			t.Errorf("delete %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			continue
		}
		realnodetest.Eventually(t, 2*time.Minute, u.GetKind()+" "+u.GetName()+" gone", func() (bool, string) {
			_, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
			return err != nil, fmt.Sprint(err)
		})
	}
	c.objs = kept
}
