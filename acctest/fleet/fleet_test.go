// Package fleet is the fleet-scale scheduling benchmark (make bench-fleet):
// N simulated nodes of 8 V100s each, published by the node plugin's own
// code (internal/simnode), on the local control plane, and the real
// scheduler placing pods whose claims come from a template, measured as
// Kubernetes' scheduler_perf measures its DRA cases: throughput over the
// measured pods after a warm-up, and each pod's latency from its creation
// to its binding. Every publishing mode runs in the same run on the same
// control plane: whole GPUs (one device per GPU, the baseline), 25 %
// slices as partitions, 25 % slices as consumable capacity, and both with
// every kind published at once. Figures, not pass/fail.
package fleet

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

const (
	gpusPerNode = 8
	model       = "Tesla V100-PCIE-32GB"
)

// mode is one way of publishing the fleet and of claiming from it.
type mode struct {
	name     string
	publish  publish.Options
	selector string
	capacity map[resourcev1.QualifiedName]resource.Quantity
}

var (
	quarter    = map[resourcev1.QualifiedName]resource.Quantity{contract.CapacityMemory: resource.MustParse("8Gi"), contract.CapacityCompute: resource.MustParse("25")}
	everything = publish.Options{Fractions: contract.DefaultFractions, AnySize: true, TimeSliced: true}
	modes      = []mode{
		{"whole GPUs, 1 device/GPU (baseline)", publish.Options{Fractions: []int{100}}, render.Selector(model, 100), nil},
		{"25 % partitions, 7 devices/GPU", publish.Options{Fractions: contract.DefaultFractions}, render.Selector(model, 25), nil},
		{"25 % as capacity, 1 device/GPU", publish.Options{AnySize: true}, render.SharedSelector(model, contract.SharingAnySize), quarter},
		{"25 % partitions, every kind (9/GPU)", everything, render.Selector(model, 25), nil},
		{"25 % as capacity, every kind (9/GPU)", everything, render.SharedSelector(model, contract.SharingAnySize), quarter},
	}
)

// result is one mode's figures at one fleet size.
type result struct {
	nodes               int
	mode                string
	devicesPerGPU       float64
	sliceBytesPerNode   int
	publish             time.Duration
	podsPerSecond       float64
	p50, p99            time.Duration
	measured, scheduled int
}

func sizes(b *testing.B) []int {
	raw := os.Getenv("GPUSLICE_FLEET_SIZES")
	if raw == "" {
		raw = "100,500"
	}
	var out []int
	for _, s := range strings.Split(raw, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("GPUSLICE_FLEET_SIZES=%q: want node counts, e.g. 100,500", raw)
		}
		out = append(out, n)
	}
	return out
}

func BenchmarkFleet(b *testing.B) {
	clustertest.RequireTools(b)
	var results []result
	for _, n := range sizes(b) {
		results = append(results, fleet(b, n)...)
	}
	printTable(results)
}

// fleet starts a control plane with n simulated nodes and runs every mode
// on it in turn.
func fleet(b *testing.B, n int) []result {
	ctx := context.Background()
	// As scheduler_perf: no node-lifecycle controller (the simulated nodes'
	// leases are renewed late on a loaded machine, and nodes marked
	// unreachable would stop the benchmark, not measure it).
	c, err := cluster.Start(ctx, cluster.Options{ClientQPS: 500, Timeout: 2 * time.Minute, Controllers: "*,-node-lifecycle-controller"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	client := c.Client()
	nodes := make([]*simnode.Node, n)
	start := time.Now()
	err = parallel(n, 16, func(i int) error {
		var err error
		// counters only: each mode's publish time is then a whole publish
		nodes[i], err = simnode.Start(ctx, c, fmt.Sprintf("fleet-%04d", i), simulate.Spec{Profile: "v100-32gb", Count: gpusPerNode}, publish.Options{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, nd := range nodes {
			nd.Stop()
		}
	}()
	if _, err := simnode.Published(ctx, client, nodes, start, 10*time.Minute); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("fleet: %d nodes registered with their counter sets in %s\n", n, time.Since(start).Round(time.Millisecond))
	if err := untaint(ctx, client); err != nil {
		b.Fatal(err)
	}

	var out []result
	for i, m := range modes {
		r := result{nodes: n, mode: m.name}
		began := time.Now()
		// from nothing published, as a fresh plugin on every node
		for _, nd := range nodes {
			nd.Publish(publish.Options{})
		}
		if _, err = simnode.Published(ctx, client, nodes, time.Now(), 10*time.Minute); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for _, nd := range nodes {
			nd.Publish(m.publish)
		}
		if r.publish, err = simnode.Published(ctx, client, nodes, start, 10*time.Minute); err != nil {
			b.Fatal(err)
		}
		r.devicesPerGPU = float64(len(nodes[0].Devices)) / gpusPerNode
		if r.sliceBytesPerNode, err = sliceBytes(ctx, client, n); err != nil {
			b.Fatal(err)
		}
		if err := schedule(ctx, client, fmt.Sprintf("fleet-mode-%d", i), m, n, &r); err != nil {
			b.Fatal(err)
		}
		// Printed as it comes (a benchmark's log shows only at its end): a
		// run of hours cut short keeps what it measured.
		fmt.Printf("measured: %d nodes, %s: %.1f pods/s, p50 %s, p99 %s, %d/%d scheduled, %d slice bytes/node, publish %s (the mode took %s)\n",
			n, m.name, r.podsPerSecond, r.p50, r.p99, r.scheduled, r.measured, r.sliceBytesPerNode, r.publish.Round(100*time.Millisecond), time.Since(began).Round(time.Second))
		out = append(out, r)
	}
	return out
}

// untaint removes the not-ready taint the API server puts on every new
// node: without the node-lifecycle controller nothing else would, and no
// pod would schedule.
func untaint(ctx context.Context, client kubernetes.Interface) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	return parallel(len(nodes.Items), 16, func(i int) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := client.CoreV1().Nodes().Get(ctx, nodes.Items[i].Name, metav1.GetOptions{})
			if err != nil || len(node.Spec.Taints) == 0 {
				return err
			}
			node.Spec.Taints = nil
			_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			return err
		})
	})
}

// sliceBytes is the ResourceSlices' size per node, as the API server
// stores them (protobuf).
func sliceBytes(ctx context.Context, client kubernetes.Interface, nodes int) (int, error) {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: resourcev1.ResourceSliceSelectorDriver + "=" + contract.DriverName})
	if err != nil {
		return 0, err
	}
	total := 0
	for i := range list.Items {
		total += list.Items[i].Size()
	}
	return total / nodes, nil
}

// schedule creates the mode's class and claim template in namespace ns,
// then warm-up pods and measured pods (each claiming one slice), and
// records throughput and latency of the measured ones; it deletes them
// all and waits until their claims are gone.
func schedule(ctx context.Context, client kubernetes.Interface, ns string, m mode, nodes int, r *result) error {
	warmup, measured := nodes/2, 4*nodes // fits even whole GPUs: 8 per node
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("namespace %s: no default service account: %w", ns, err)
	}
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: m.selector}}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	exactly := &resourcev1.ExactDeviceRequest{DeviceClassName: ns, Count: 1}
	if m.capacity != nil {
		exactly.Capacity = &resourcev1.CapacityRequirements{Requests: m.capacity}
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: exactly}},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}

	// A retry watcher resumes where a closed watch stopped: a plain watch
	// the API server ends under load would lose bindings and the count.
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	var mu sync.Mutex
	created, bound := map[string]time.Time{}, map[string]time.Time{}
	boundCh := make(chan struct{}, warmup+measured)
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || pod.Spec.NodeName == "" {
				continue
			}
			mu.Lock()
			if _, seen := bound[pod.Name]; !seen {
				bound[pod.Name] = time.Now()
				boundCh <- struct{}{}
			}
			mu.Unlock()
		}
	}()
	create := func(from, count int) error {
		return parallel(count, 16, func(i int) error {
			name := fmt.Sprintf("pod-%05d", from+i)
			mu.Lock()
			created[name] = time.Now()
			mu.Unlock()
			_, err := client.CoreV1().Pods(ns).Create(ctx, pod(name), metav1.CreateOptions{})
			return err
		})
	}
	waitBound := func(count int) error {
		timeout := time.After(10 * time.Minute)
		for range count {
			select {
			case <-boundCh:
			case <-timeout:
				return fmt.Errorf("%s: pods not all scheduled in 10 minutes: %s", ns, pending(ctx, client, ns))
			}
		}
		return nil
	}
	if err := create(0, warmup); err != nil {
		return err
	}
	if err := waitBound(warmup); err != nil {
		return err
	}
	begin := time.Now()
	if err := create(warmup, measured); err != nil {
		return err
	}
	if err := waitBound(measured); err != nil {
		return err
	}
	mu.Lock()
	var latencies []time.Duration
	last := begin
	for i := warmup; i < warmup+measured; i++ {
		name := fmt.Sprintf("pod-%05d", i)
		if b, ok := bound[name]; ok {
			latencies = append(latencies, b.Sub(created[name]))
			if b.After(last) {
				last = b
			}
		}
	}
	mu.Unlock()
	slices.Sort(latencies)
	r.measured, r.scheduled = measured, len(latencies)
	r.podsPerSecond = float64(len(latencies)) / last.Sub(begin).Seconds()
	r.p50, r.p99 = latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	return cleanUp(ctx, client, ns)
}

// pending says how many pods wait and why the first one does.
func pending(ctx context.Context, client kubernetes.Interface, ns string) string {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	waiting, why := 0, ""
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			continue
		}
		waiting++
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && why == "" {
				why = p.Name + ": " + c.Message
			}
		}
	}
	return fmt.Sprintf("%d of %d pods unbound (%s)", waiting, len(pods.Items), why)
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.gpuslice.test/pause:3.10",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
					Claims:   []corev1.ResourceClaim{{Name: "gpu"}},
				},
			}},
		},
	}
}

// cleanUp force-deletes the namespace's pods (no kubelet confirms their
// end) and waits until their claims are gone and deallocated.
func cleanUp(ctx context.Context, client kubernetes.Interface, ns string) error {
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := client.ResourceV1().DeviceClasses().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(claims.Items) > 0 {
			// their pods are gone: the controller removes them
			return false, nil
		}
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

func printTable(results []result) {
	fmt.Println()
	fmt.Println("| nodes × 8 GPUs | mode | devices/GPU | ResourceSlice bytes/node | publish (all nodes) | pods/s | p50 | p99 | scheduled |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		fmt.Printf("| %d | %s | %.0f | %d | %.1f s | %.1f | %d ms | %d ms | %d/%d |\n", r.nodes, r.mode, r.devicesPerGPU, r.sliceBytesPerNode,
			r.publish.Seconds(), r.podsPerSecond, r.p50.Milliseconds(), r.p99.Milliseconds(), r.scheduled, r.measured)
	}
}
