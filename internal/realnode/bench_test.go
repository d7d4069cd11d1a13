package realnode_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/localregistry"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// BenchmarkRealNodeStart measures a real node from nothing to its first
// sliced pod running, on a running control plane: cold (an empty node
// directory: the pause and slice-check images are pulled) and warm (a node
// restarting with its images). The control plane's own start is reported
// once, beside.
func BenchmarkRealNodeStart(b *testing.B) {
	realnodetest.Require(b)
	ctx := context.Background()
	began := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	controlPlane := time.Since(began)
	reg := startRegistry(b)
	createSliceClass(b, c.Client())
	dir := b.TempDir()
	for _, warm := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "warm"}[warm]
		b.Run(name, func(b *testing.B) {
			var ready, slicesUp, pod time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				n := startNode(b, c, reg, filepath.Join(dir, "bench-1"), "v100-32gb:1", warm)
				runPod(b, c.Client(), n.Name, fmt.Sprintf("first-%s-%d", name, i), 1)
				pod += time.Since(start)
				ready += n.Started.Ready
				slicesUp += n.Started.SlicesPublished
				if err := n.Stop(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(controlPlane.Seconds(), "control-plane-s")
			b.ReportMetric(ready.Seconds()/float64(b.N), "node-ready-s")
			b.ReportMetric(slicesUp.Seconds()/float64(b.N), "slices-published-s")
			b.ReportMetric(pod.Seconds()/float64(b.N), "first-pod-running-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkNodePrepare measures NodePrepareResources as the kubelet sees
// it — its own dra_operations_duration_seconds for PrepareResources — for
// pods with one and with eight claims, each pod one sample (the histogram's
// sum grows by exactly that pod's preparation), reported as p50 and p99.
func BenchmarkNodePrepare(b *testing.B) {
	realnodetest.Require(b)
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	reg := startRegistry(b)
	createSliceClass(b, c.Client())
	// Two V100s: eight 25 % slices for the pod with eight claims.
	n := startNode(b, c, reg, filepath.Join(b.TempDir(), "bench-1"), "v100-32gb:2", false)
	defer n.Stop()
	for _, claims := range []int{1, 8} {
		b.Run(fmt.Sprintf("claims=%d", claims), func(b *testing.B) {
			var samples []float64
			for i := 0; i < b.N; i++ {
				before := kubeletPrepareSum(b, n)
				runPod(b, c.Client(), n.Name, fmt.Sprintf("prep-%d-%d", claims, i), claims)
				samples = append(samples, kubeletPrepareSum(b, n)-before)
			}
			slices.Sort(samples)
			b.ReportMetric(quantile(samples, 0.5)*1000, "p50-ms")
			b.ReportMetric(quantile(samples, 0.99)*1000, "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[i]
}

func startRegistry(b *testing.B) *localregistry.Registry {
	b.Helper()
	reg, err := localregistry.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = reg.Stop() })
	if err := realnode.PushImages(context.Background(), reg, cluster.FindBinDir()); err != nil {
		b.Fatal(err)
	}
	return reg
}

func startNode(b *testing.B, c *cluster.Cluster, reg *localregistry.Registry, dir, gpus string, keepImages bool) *realnode.Node {
	b.Helper()
	n, err := realnode.Start(context.Background(), realnode.Options{
		Name: "bench-1", Dir: dir, BinDir: cluster.FindBinDir(), Kubeconfig: c.KubeconfigPath, Client: c.Client(),
		PauseImage: images.Pause, Mirrors: reg.Mirrors(), KeepImages: keepImages,
		NodePlugin: &realnode.NodePluginOptions{GPUs: gpus},
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// createSliceClass is a package of 25 % slices, as the engine renders one.
func createSliceClass(b *testing.B, client kubernetes.Interface) {
	b.Helper()
	quarter := &spec.Package{Name: "bench-8gi", GPUModel: simulate.V100PCIe32GB.Name, Fraction: 25}
	_, err := client.ResourceV1().DeviceClasses().Create(context.Background(), render.DeviceClass(quarter), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
}

// runPod runs a pod with the given number of 25 % claims on node until it
// is Running, then deletes it and waits until it is gone.
func runPod(b *testing.B, client kubernetes.Interface, node, name string, claims int) {
	b.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "c", Image: images.SliceCheck, Command: []string{"slice-check", "--hold", "1", "--sleep"},
			}},
		},
	}
	for i := 0; i < claims; i++ {
		claim := fmt.Sprintf("gpu-%d", i)
		_, err := client.ResourceV1().ResourceClaims("default").Create(ctx, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + claim},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "bench-8gi"},
			}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: claim, ResourceClaimName: ptr.To(name + "-" + claim)})
		pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: claim})
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitPod(b, client, name, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err := client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	waitPod(b, client, name, nil)
	for i := 0; i < claims; i++ {
		_ = client.ResourceV1().ResourceClaims("default").Delete(ctx, fmt.Sprintf("%s-gpu-%d", name, i), metav1.DeleteOptions{})
	}
}

// waitPod waits until done holds for the pod, or (done nil) it is gone.
func waitPod(b *testing.B, client kubernetes.Interface, name string, done func(*corev1.Pod) bool) {
	b.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if done == nil && err != nil {
			return
		}
		if done != nil && err == nil && done(p) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("pod %s: not there within 2 minutes (%v)", name, err)
		}
	}
}

// kubeletPrepareSum reads the kubelet's total seconds spent in successful
// PrepareResources operations.
func kubeletPrepareSum(b *testing.B, n *realnode.Node) float64 {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // kubelet's self-signed serving certificate
	resp, err := client.Get("https://" + n.IP + ":10250/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	f := families["dra_operations_duration_seconds"]
	if f == nil {
		return 0 // no operation yet
	}
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["operation_name"] == "PrepareResources" && labels["is_error"] == "false" {
			return m.GetHistogram().GetSampleSum()
		}
	}
	return 0
}
