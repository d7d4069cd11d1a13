package cluster_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// One test drives a whole life cycle, because starting a control plane is
// the expensive part.
func TestStartServeStop(t *testing.T) {
	c := clustertest.Start(t, cluster.Options{})
	t.Logf("control plane started in %s", c.StartupTime)
	ctx := context.Background()

	// The admin kubeconfig works for the machine's kubectl, as a person
	// would use it.
	if _, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command("kubectl", "--kubeconfig", c.KubeconfigPath, "get", "namespaces", "-o", "name").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "namespace/kube-system") {
			t.Fatalf("kubectl against the kubeconfig: %v\n%s", err, out)
		}
	}

	// RBAC is on: an unauthenticated request is refused.
	anon := c.RESTConfig()
	anon.BearerToken = ""
	anon.TLSClientConfig.CAData = c.CAData
	anonClient, err := kubernetes.NewForConfig(anon)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anonClient.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("anonymous list of namespaces succeeded: authorization is not enforced")
	}

	node, err := c.AddNode(ctx, cluster.NodeSpec{Name: "node-a", CPU: "8", Memory: "32Gi"})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.Allocatable[corev1.ResourceCPU]; got.String() != "8" {
		t.Errorf("node cpu allocatable = %s, want 8", got.String())
	}
	if _, err := c.Client().CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
		t.Errorf("node lease not created: %v", err)
	}

	ns, err := cluster.CreateNamespace(ctx, c.Client(), "team-a", map[string]string{"gpuslice.dev/tenant": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["gpuslice.dev/tenant"] != "true" {
		t.Errorf("namespace labels = %v", ns.Labels)
	}

	// A pod is scheduled onto the fake node by the real scheduler.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "team-a"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := c.Client().CoreV1().Pods("team-a").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := c.Client().CoreV1().Pods("team-a").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName == "node-a" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not bound to node-a within 30s: %+v", p.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}

	schedulerIdentity(t, c, "node-a")
	outages(t, c)

	pids := c.PIDs()
	dir := c.Dir
	c.Stop()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop (kill -0: %v)", pid, err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s not removed: %v", dir, err)
	}
}

func TestPortInUseIsAClearError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	// Start checks the tools before the port.
	clustertest.RequireTools(t)
	_, err = cluster.Start(context.Background(), cluster.Options{APIServerPort: port})
	if err == nil {
		t.Fatal("Start succeeded on a port already in use")
	}
	want := "port " + strconv.Itoa(port) + " on 127.0.0.1 is already in use"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %q, want it to contain %q", err, want)
	}
}

func TestMissingToolSaysWhatToRun(t *testing.T) {
	_, err := cluster.Start(context.Background(), cluster.Options{BinDir: t.TempDir()})
	if !errors.Is(err, cluster.ErrToolMissing) {
		t.Fatalf("error = %v, want ErrToolMissing", err)
	}
	if !strings.Contains(err.Error(), "run `make tools`") {
		t.Fatalf("error %q does not say to run `make tools`", err)
	}
}

// BenchmarkStart measures a cold start of the whole control plane to ready
// (goal ≤15 s on a 2-core machine) and its stop.
func BenchmarkStart(b *testing.B) {
	clustertest.RequireTools(b)
	var toReady time.Duration
	for b.Loop() {
		c, err := cluster.Start(context.Background(), cluster.Options{})
		if err != nil {
			b.Fatal(err)
		}
		toReady += c.StartupTime
		c.Stop()
	}
	b.ReportMetric(toReady.Seconds()/float64(b.N), "s-to-ready/op")
}

// outages kills the API server and stops etcd, each while a client works:
// requests fail during the outage, and afterwards the same client works
// again and what was stored before is still there.
func outages(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	cms := c.Client().CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.KillAPIServer()
	if _, err := cms.Get(ctx, "before", metav1.GetOptions{}); err == nil {
		t.Fatal("a request succeeded while the API server was killed")
	}
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("after the API server came back: %v", err)
	}

	c.StopEtcd(5 * time.Second)
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err := cms.Create(short, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "during"}}, metav1.CreateOptions{})
	cancel()
	if err == nil {
		t.Fatal("a write succeeded while etcd was stopped")
	}
	if err := c.StartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("after etcd came back, its data is gone: %v", err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("write after etcd came back: %v", err)
	}
}
