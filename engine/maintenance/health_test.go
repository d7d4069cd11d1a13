package maintenance_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestListShowsHealth: a GPU whose node plugin taints its devices
// gpuslice.dev/unhealthy is listed unhealthy with the taint's reason and
// the claim still allocated on it; its healthy neighbour is listed
// healthy; once the taint goes, so does the unhealthy state.
func TestListShowsHealth(t *testing.T) {
	c := clustertest.Shared(t)
	cs := c.Client()
	ctx := context.Background()
	const node, ns, class = "health-list-node", "health-list", "health-list-whole"
	opts := publish.Options{Fractions: []int{100}}
	n, err := simnode.Start(ctx, c, node, simulate.Spec{Profile: "v100-32gb", Count: 2}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := simnode.Published(ctx, cs, []*simnode.Node{n}, time.Now(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + contract.DriverName + `" && device.attributes["` + contract.DriverName + `"].index == 0`}}}}}
	if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.ResourceV1().DeviceClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	if _, err := cluster.CreateNamespace(ctx, cs, ns, nil); err != nil {
		t.Fatal(err)
	}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: ns}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}}}}}
	if _, err := cs.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: ns}, Spec: corev1.PodSpec{
		NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("held")}},
		Containers:     []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
	}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if dev := allocatedDevice(t, cs, ns, "held"); dev != "gpu-0-100pct-1" {
		t.Fatalf("claim held got %s, want GPU 0's whole device", dev)
	}

	n.PublishTainted(opts, publish.Taints{n.UUID(0): {{Key: contract.TaintUnhealthy, Value: "xid-79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}})
	states := waitForGPUs(t, cs, node, func(s map[int64]maintenance.GPUState) bool { return s[0].Unhealthy() })
	if g := states[0]; g.Health != "unhealthy: xid-79 (NoSchedule)" || g.HealthReason != "xid-79" || len(g.Claims) != 1 || g.Claims[0] != ns+"/held" || g.Tainted != g.Devices || g.Drained != "" ||
		len(g.Taints) != 1 || !g.Taints[0].FromSlice || g.Taints[0].Key != contract.TaintUnhealthy {
		t.Errorf("GPU 0 listed as %+v, want unhealthy (xid-79) by its node plugin's taint, claim %s/held still on it", g, ns)
	}
	if g := states[1]; g.Health != "healthy" || g.HealthReason != "" || g.Tainted != 0 || len(g.Claims) != 0 {
		t.Errorf("GPU 1 listed as %+v, want healthy, untainted, no claim", g)
	}

	n.Publish(opts)
	states = waitForGPUs(t, cs, node, func(s map[int64]maintenance.GPUState) bool { return !s[0].Unhealthy() })
	if g := states[0]; g.Health != "healthy" || g.Tainted != 0 || len(g.Claims) != 1 {
		t.Errorf("GPU 0 listed as %+v once untainted, want healthy with its claim", g)
	}
}

// waitForGPUs lists the node's GPUs, by index, until ok holds of them.
func waitForGPUs(t *testing.T, cs kubernetes.Interface, node string, ok func(map[int64]maintenance.GPUState) bool) map[int64]maintenance.GPUState {
	t.Helper()
	var states map[int64]maintenance.GPUState
	waitFor(t, "the GPUs of "+node+" listed as wanted", func() (bool, error) {
		gpus, err := maintenance.List(context.Background(), cs)
		if err != nil {
			return false, err
		}
		states = map[int64]maintenance.GPUState{}
		for _, g := range gpus {
			if g.Node == node {
				states[g.Index] = g
			}
		}
		return ok(states), nil
	})
	return states
}
