package maintenance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/maintenance"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestDrainOnTheScheduler: on a node with two whole V100s, draining GPU 0
// sends a new claim to GPU 1 and leaves a second one pending (no untainted
// GPU is free); undrain lets it onto GPU 0. Draining GPU 0 again with
// -evict makes the device taint eviction controller delete the pod on it
// while the pod on GPU 1 stays; undrain removes every rule.
func TestDrainOnTheScheduler(t *testing.T) {
	c := clustertest.Shared(t)
	cs := c.Client()
	ctx := context.Background()
	node := "drain-node"
	n, err := simnode.Start(ctx, c, node, simulate.Spec{Profile: "v100-32gb", Count: 2}, publish.Options{Fractions: []int{100}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := simnode.Published(ctx, cs, []*simnode.Node{n}, time.Now(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "drain-whole"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + contract.DriverName + `"`}}}}}
	if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.ResourceV1().DeviceClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	const ns = "drain"
	if _, err := cluster.CreateNamespace(ctx, cs, ns, nil); err != nil {
		t.Fatal(err)
	}

	if _, err := maintenance.Undrain(ctx, cs, maintenance.Target{Node: node}); err == nil || !strings.Contains(err.Error(), "drain-node is not drained") {
		t.Errorf("undrain of an undrained node: %v", err)
	}
	if _, err := maintenance.Drain(ctx, cs, maintenance.Target{Node: node, GPU: "7"}, false); err == nil || !strings.Contains(err.Error(), "node drain-node has no GPU 7") {
		t.Errorf("drain of a GPU the node lacks: %v", err)
	}
	if _, err := maintenance.Drain(ctx, cs, maintenance.Target{Node: "no-such-node"}, false); err == nil || !strings.Contains(err.Error(), "node no-such-node publishes no GPUs") {
		t.Errorf("drain of a node without GPUs: %v", err)
	}

	gpu0 := maintenance.Target{Node: node, GPU: "0"}
	d, err := maintenance.Drain(ctx, cs, gpu0, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Rules) != 1 || len(d.Changed) != 1 || d.Effect != resourcev1.DeviceTaintEffectNoSchedule {
		t.Errorf("drain of GPU 0: %+v, want one NoSchedule rule created", d)
	}
	if again, err := maintenance.Drain(ctx, cs, gpu0, false); err != nil || len(again.Changed) != 0 {
		t.Errorf("second drain of GPU 0 changed %v (%v), want nothing", again, err)
	}

	runPod(t, cs, ns, "a")
	if dev := allocatedDevice(t, cs, ns, "a"); !strings.HasPrefix(dev, "gpu-1-") {
		t.Fatalf("with GPU 0 drained, claim a got %s, want GPU 1's", dev)
	}
	gpus, err := maintenance.List(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	states := map[int64]maintenance.GPUState{}
	for _, g := range gpus {
		if g.Node == node {
			states[g.Index] = g
		}
	}
	if g := states[0]; g.Drained != resourcev1.DeviceTaintEffectNoSchedule || g.Tainted != g.Devices || g.Devices == 0 || len(g.Claims) != 0 ||
		len(g.Taints) != 1 || g.Taints[0].Key != maintenance.TaintKey {
		t.Errorf("GPU 0 listed as %+v, want drained NoSchedule, every device tainted by the drain, no claim", g)
	}
	if g := states[1]; g.Drained != "" || g.Tainted != 0 || len(g.Claims) != 1 || g.Claims[0] != ns+"/a" {
		t.Errorf("GPU 1 listed as %+v, want undrained holding %s/a", g, ns)
	}
	runPod(t, cs, ns, "b")
	waitFor(t, "pod b to be unschedulable", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "b", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})

	u, err := maintenance.Undrain(ctx, cs, gpu0)
	if err != nil || len(u.Rules) != 1 || len(u.NodeRules) != 0 {
		t.Fatalf("undrain of GPU 0: %+v %v", u, err)
	}
	if dev := allocatedDevice(t, cs, ns, "b"); !strings.HasPrefix(dev, "gpu-0-") {
		t.Fatalf("after undrain, claim b got %s, want GPU 0's", dev)
	}

	evictStart := time.Now()
	d, err = maintenance.Drain(ctx, cs, gpu0, true)
	if err != nil || d.Effect != resourcev1.DeviceTaintEffectNoExecute {
		t.Fatalf("drain -evict of GPU 0: %+v %v", d, err)
	}
	waitFor(t, "pod b on GPU 0 to be evicted", func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "b", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && p.DeletionTimestamp != nil, err
	})
	t.Logf("drain -evict to pod b's deletion: %v", time.Since(evictStart).Round(10*time.Millisecond))
	// The controller reports on its rule once it has evicted what it
	// will: then pod a must still be there.
	waitFor(t, "the eviction to be over", func() (bool, error) {
		r, err := cs.ResourceV1().DeviceTaintRules().Get(ctx, d.Rules[0], metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range r.Status.Conditions {
			if c.Type == resourcev1.DeviceTaintConditionEvictionInProgress && c.Status == metav1.ConditionFalse && c.ObservedGeneration == r.Generation {
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("drain -evict to the rule's EvictionInProgress=False: %v", time.Since(evictStart).Round(10*time.Millisecond))
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, "a", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("pod a on GPU 1 was evicted too: %v", err)
	}
	gpus, err = maintenance.List(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		if g.Node == node && g.Index == 0 && (g.Drained != resourcev1.DeviceTaintEffectNoExecute || len(g.Claims) != 1 || g.Claims[0] != ns+"/b") {
			t.Errorf("GPU 0 listed as %+v after drain -evict, want drained NoExecute, %s/b still allocated on it", g, ns)
		}
	}

	if err := cs.CoreV1().Pods(ns).Delete(ctx, "b", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if _, err := maintenance.Drain(ctx, cs, maintenance.Target{Node: node}, false); err != nil {
		t.Fatal(err)
	}
	u, err = maintenance.Undrain(ctx, cs, gpu0)
	if err != nil || len(u.Rules) != 1 || len(u.NodeRules) != 1 || u.NodeRules[0] != "gpuslice-drain-"+node {
		t.Errorf("undrain of GPU 0 under the node's drain: %+v (%v), want its rule deleted and the node's named", u, err)
	}
	if _, err := maintenance.Drain(ctx, cs, gpu0, false); err != nil {
		t.Fatal(err)
	}
	u, err = maintenance.Undrain(ctx, cs, maintenance.Target{Node: node})
	if err != nil || len(u.Rules) != 2 {
		t.Errorf("undrain of the node removed %+v (%v), want the node's rule and GPU 0's", u, err)
	}
}

// runPod creates claim name of class drain-whole and a pod using it.
func runPod(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "drain-whole"}}}}}}
	if _, err := cs.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name)}},
		Containers:     []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
	}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// allocatedDevice waits for claim name's allocation and returns its device.
func allocatedDevice(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	var dev string
	waitFor(t, "claim "+name+" to be allocated", func() (bool, error) {
		c, err := cs.ResourceV1().ResourceClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || c.Status.Allocation == nil {
			return false, err
		}
		dev = c.Status.Allocation.Devices.Results[0].Device
		return true, nil
	})
	return dev
}

func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) { return cond() }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
