package driver_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/kubeletsim"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
)

// BenchmarkPrepare measures NodePrepareResources through the plugin's
// socket, as the kubelet calls it, for pods with 1 and with 8 claims (each
// iteration is 50 prepare calls, each followed by an unprepare that is not
// timed); it reports the p50 and p99 of one call. Goal: p50 ≤ 5 ms, p99 ≤ 20 ms.
func BenchmarkPrepare(b *testing.B) {
	c := clustertest.Shared(b)
	ctx := context.Background()
	node := "bench-prepare-node"
	if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: node}); err != nil {
		b.Fatal(err)
	}
	ns := "bench-prepare"
	if _, err := cluster.CreateNamespace(ctx, c.Client(), ns, nil); err != nil {
		b.Fatal(err)
	}
	e := &env{c: c, client: c.Client(), ns: ns, ctx: ctx, tb: b}
	// a client that does not throttle: 50 calls of 8 claims are 400 GETs,
	// past the shared test client's burst
	rc := c.RESTConfig()
	rc.QPS, rc.Burst = 10000, 10000
	cfg := pluginConfig(kubernetes.NewForConfigOrDie(rc), node, filepath.Join(b.TempDir(), node), 2)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	p, err := driver.Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	e.waitSlices(node, 14)
	class := e.class(25)
	var claims []*resourcev1.ResourceClaim
	for i := 0; i < 8; i++ {
		pod := fmt.Sprintf("p%d", i)
		cl, _ := e.placement(pod, e.runPod(pod, class, node), true)
		claims = append(claims, cl)
	}
	k, err := kubeletsim.Dial(cfg.SocketPath())
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			var samples []time.Duration
			sum0, n0 := histogram(b, reg, "gpuslice_prepare_duration_seconds")
			for i := 0; i < b.N; i++ {
				for j := 0; j < 50; j++ {
					start := time.Now()
					if _, err := k.Prepare(ctx, claims[:n]...); err != nil {
						b.Fatal(err)
					}
					samples = append(samples, time.Since(start))
					b.StopTimer()
					if err := k.Unprepare(ctx, claims[:n]...); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
			slices.Sort(samples)
			b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds())/1000, "p99-ms")
			// the plugin's own share: the rest is gRPC and the helper's GET of each claim
			sum, n := histogram(b, reg, "gpuslice_prepare_duration_seconds")
			b.ReportMetric((sum-sum0)/float64(n-n0)*1000, "plugin-mean-ms")
		})
	}
}

func histogram(b *testing.B, reg *prometheus.Registry, name string) (float64, uint64) {
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			h := f.Metric[0].Histogram
			return h.GetSampleSum(), h.GetSampleCount()
		}
	}
	b.Fatalf("no metric %s", name)
	return 0, 0
}

// BenchmarkPublish8GPUs measures the time from starting the plugin on a
// node with 8 GPUs until the API server holds all its slices (8 counter
// sets, 56 devices).
func BenchmarkPublish8GPUs(b *testing.B) {
	c := clustertest.Shared(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		node := fmt.Sprintf("bench-publish-%d-%d", b.N, i)
		if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: node}); err != nil {
			b.Fatal(err)
		}
		cfg := pluginConfig(c.Client(), node, filepath.Join(b.TempDir(), node), 8)
		b.StartTimer()
		p, err := driver.Start(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := c.Client().ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			n := 0
			for _, s := range list.Items {
				n += len(s.Spec.Devices)
			}
			return n == 56 && len(list.Items) == 16, err
		})
		b.StopTimer()
		p.Stop()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
