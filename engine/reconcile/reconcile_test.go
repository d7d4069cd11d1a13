package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/lock"
	"github.com/gpuslice/gpuslice/engine/reconcile"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/gitserver"
)

const interval = 3 * time.Second

// TestReconcileFollowsGit runs the loop against a Git repository served
// over smart HTTP: each commit is applied within about an interval and
// reported (status ConfigMap, Events, metrics), an out-of-band edit is
// reverted, a broken commit is reported with its file and line while the
// cluster stays at the last good one, and a round finding the stack
// locked by another writer is skipped.
func TestReconcileFollowsGit(t *testing.T) {
	c := clustertest.Shared(t)
	client := c.Client()
	const ns, stack = "gitops", "gitops"
	srv := gitserver.New(t)
	file := "stacks/gitops/main.tf"
	rev1 := srv.Commit("first", map[string]string{file: quickstart(ns, "2Gi")})

	reg, invNS := startLoop(t, c, stack, func(*engine.Engine) reconcile.Source {
		return &reconcile.Git{URL: srv.URL, Ref: "main", Path: "stacks/gitops", WorkDir: t.TempDir()}
	})
	statusName := reconcile.StatusName(stack)
	ctx := context.Background()

	waitStatus(t, client, invNS, stack, "the first commit applied", func(d map[string]string) bool {
		return d[reconcile.KeyLastAppliedRevision] == rev1 && d[reconcile.KeyInSync] == "true"
	})
	assertMemory(t, client, ns, "2Gi")

	start := time.Now()
	rev2 := srv.Commit("more memory", map[string]string{file: quickstart(ns, "3Gi")})
	waitStatus(t, client, invNS, stack, "the second commit applied", func(d map[string]string) bool {
		return d[reconcile.KeyLastAppliedRevision] == rev2
	})
	t.Logf("commit %s applied %s after the push (interval %s)", rev2[:12], time.Since(start).Round(time.Millisecond), interval)
	assertMemory(t, client, ns, "3Gi")
	waitEvent(t, client, invNS, statusName, reconcile.ReasonApplied, "applied revision "+rev2[:12]+": 0 added, 1 changed")
	assertMetrics(t, reg, stack, rev2, 1, 0)

	// Someone edits the Service by hand, as kubectl edit does.
	svc, err := client.CoreV1().Services(ns).Get(ctx, "ollama", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
	start = time.Now()
	if _, err := client.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, client.CoreV1().RESTClient(), "services", ns, "ollama", &corev1.Service{}, "the edited Service reverted", func(o runtime.Object) bool {
		return o.(*corev1.Service).Spec.Ports[0].TargetPort.IntValue() == 11434
	})
	t.Logf("out-of-band edit reverted %s after it (interval %s)", time.Since(start).Round(time.Millisecond), interval)

	// A broken commit: reported, the cluster stays at rev2.
	rev3 := srv.Commit("typo", map[string]string{file: quickstart(ns, "3Gi") + "resource \"gpuslice_workload\" \"x\" {\n  bogus = 1\n}\n"})
	d := waitStatus(t, client, invNS, stack, "the broken commit reported", func(d map[string]string) bool {
		return d[reconcile.KeyRevision] == rev3 && d[reconcile.KeyInSync] == "false"
	})
	if d[reconcile.KeyLastAppliedRevision] != rev2 || !strings.Contains(d[reconcile.KeyLastError], "stacks/gitops/main.tf:35:3: Unsupported argument") || d[reconcile.KeyLastRound] != "failed" {
		t.Errorf("status after a broken commit = %v, want lastAppliedRevision %s, lastRound failed and lastError naming stacks/gitops/main.tf:35:3", d, rev2)
	}
	waitEvent(t, client, invNS, statusName, reconcile.ReasonFailed, "stacks/gitops/main.tf:35:3")
	assertMetrics(t, reg, stack, rev2, 0, 1)
	assertMemory(t, client, ns, "3Gi")

	// Another writer holds the stack's lock: rounds are skipped until it
	// lets go, then the fix is applied.
	other, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	held, err := other.Locks().Acquire(ctx, stack, lock.Options{Operation: "gpuslice apply"})
	if err != nil {
		t.Fatal(err)
	}
	rev4 := srv.Commit("fix", map[string]string{file: quickstart(ns, "4Gi")})
	waitStatus(t, client, invNS, stack, "a round skipped for the lock", func(d map[string]string) bool {
		return d[reconcile.KeyRevision] == rev4 && strings.HasPrefix(d[reconcile.KeyLastRound], "skipped: locked by")
	})
	assertMemory(t, client, ns, "3Gi")
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, client, invNS, stack, "the fix applied once the lock is free", func(d map[string]string) bool {
		return d[reconcile.KeyLastAppliedRevision] == rev4 && d[reconcile.KeyInSync] == "true" && d[reconcile.KeyLastError] == ""
	})
	assertMemory(t, client, ns, "4Gi")
	assertMetrics(t, reg, stack, rev4, 1, 1)
}

// quickstart is a stack of one package, quota and exposed workload in ns.
func quickstart(ns, memory string) string {
	return fmt.Sprintf(`
resource "gpuslice_package" "small" {
  name      = "%[1]s-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_quota" "q" {
  namespace       = "%[1]s"
  slices          = { (gpuslice_package.small.name) = 2 }
  cpu_requests    = "8"
  memory_requests = "16Gi"
}

resource "gpuslice_workload" "ollama" {
  namespace = gpuslice_quota.q.namespace
  name      = "ollama"
  package   = gpuslice_package.small.name
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "%[2]s"
    memory_limit   = "8Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = "16384" }
    port {
      container_port = 11434
    }
  }
  expose {
    port = 11434
  }
}
`, ns, memory)
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func waitStatus(t *testing.T, client kubernetes.Interface, ns, stack, what string, cond func(map[string]string) bool) map[string]string {
	t.Helper()
	o := waitFor(t, client.CoreV1().RESTClient(), "configmaps", ns, reconcile.StatusName(stack), &corev1.ConfigMap{}, what, func(o runtime.Object) bool {
		return cond(o.(*corev1.ConfigMap).Data)
	})
	return o.(*corev1.ConfigMap).Data
}

// waitFor watches the named object until cond holds; the deadline is
// generous (a round's apply against a loaded machine), the latency is
// what the caller logs.
func waitFor(t *testing.T, rc cache.Getter, resource, ns, name string, obj runtime.Object, what string, cond func(runtime.Object) bool) runtime.Object {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), interval+90*time.Second)
	defer cancel()
	var last runtime.Object
	lw := cache.NewListWatchFromClient(rc, resource, ns, fields.OneTermEqualSelector("metadata.name", name))
	ev, err := watchtools.UntilWithSync(ctx, lw, obj, nil, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, nil
		}
		last = ev.Object
		return cond(ev.Object), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s (%s %s/%s): %v; last seen: %+v", what, resource, ns, name, err, last)
	}
	return ev.Object
}

func waitEvent(t *testing.T, client kubernetes.Interface, ns, object, reason, contains string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "events", ns, fields.OneTermEqualSelector("involvedObject.name", object))
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Event{}, nil, func(ev watch.Event) (bool, error) {
		e, ok := ev.Object.(*corev1.Event)
		return ok && e.Reason == reason && strings.Contains(e.Message, contains), nil
	})
	if err != nil {
		t.Fatalf("no Event %s containing %q on ConfigMap %s/%s: %v", reason, contains, ns, object, err)
	}
}

func assertMemory(t *testing.T, client kubernetes.Interface, ns, want string) {
	t.Helper()
	d, err := client.AppsV1().Deployments(ns).Get(context.Background(), "ollama", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; got.String() != want {
		t.Errorf("Deployment %s/ollama requests memory %s, want %s", ns, got.String(), want)
	}
}

func assertMetrics(t *testing.T, reg *prometheus.Registry, stack, applied string, inSync, errors float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := []string{}
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	want := map[string]float64{
		"gpuslice_reconcile_last_applied_revision{revision=" + applied + ",stack=" + stack + "}": 1,
		"gpuslice_reconcile_in_sync{stack=" + stack + "}":                                        inSync,
		"gpuslice_reconcile_errors_total{stack=" + stack + "}":                                   errors,
	}
	if len(got) != len(want) {
		t.Errorf("metrics = %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("metric %s = %v (present %v), want %v; all: %v", k, g, ok, v, got)
		}
	}
}

func destroy(t *testing.T, cfg *rest.Config, stack string) {
	e, err := engine.New(cfg, "")
	if err != nil {
		t.Error(err)
		return
	}
	defer e.Close()
	p, err := e.PlanDestroy(context.Background(), stack)
	if err == nil {
		err = e.Destroy(context.Background(), p, apply.Options{})
	}
	if err != nil {
		t.Errorf("destroy stack %s: %v", stack, err)
	}
}

// startLoop runs a reconciler of stack from the source src makes, every
// interval, until the test ends; then it stops and the stack is destroyed.
// It returns the loop's metrics and the inventory namespace (of its status).
func startLoop(t *testing.T, c *cluster.Cluster, stack string, src func(*engine.Engine) reconcile.Source) (*prometheus.Registry, string) {
	t.Helper()
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	e.Continuous = true
	status := reconcile.NewStatus(c.Client(), e.Inventory.Namespace)
	reg := prometheus.NewRegistry()
	out := &testWriter{t: t}
	r := &reconcile.Reconciler{Engine: e, Source: src(e),
		Load: func(dir string) (*hclstack.Config, diag.Diagnostics) {
			return hclstack.Load(dir, hclstack.Options{Stack: stack, VarOptions: hclstack.VarOptions{Env: []string{}}})
		},
		Stack: stack, Out: out, Err: out, Status: status, Metrics: reconcile.NewMetrics(reg)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, interval); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		status.Close()
		e.Close()
		destroy(t, c.RESTConfig(), stack)
	})
	return reg, e.Inventory.Namespace
}
