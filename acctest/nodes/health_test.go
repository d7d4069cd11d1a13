package nodes

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// An XID written to the simulated driver's fault log on a real node (kubelet,
// containerd, runc, two simulated V100s) taints every device of the GPU
// with the running pod; four new 25 % pods all land on the other GPU and a
// fifth waits, though the failing GPU has room; once the GPU is quiet for
// --health-recovery the taint goes and the fifth pod lands there.
func TestXIDTaintsGPUOnRealNode(t *testing.T) {
	shared := realnodetest.Shared(t)
	env := realnodetest.Start(t, shared.Cluster, realnodetest.Options{Names: []string{"real-health"}, GPUs: "v100-32gb:2",
		PluginArgs: []string{"--health-recovery=30s"}})
	node := env.Nodes[0]
	ctx := context.Background()
	client := shared.Cluster.Client()

	ns, class := "health", "health-v100-25pct"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	pkg := &spec.Package{Name: class, GPUModel: simulate.V100PCIe32GB.Name, Fraction: 25}
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, render.DeviceClass(pkg), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.ResourceV1().DeviceClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "slice"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: 1}}},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(name string) *corev1.Pod {
		t.Helper()
		pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				NodeSelector:   map[string]string{"kubernetes.io/hostname": node.Name},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("slice")}},
				Containers: []corev1.Container{{
					Name: "app", Image: images.SliceCheck, Command: []string{"sh", "-c", "exec sleep 3600"},
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
				}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}
	// gpuOf waits until the pod's claim is allocated and returns its GPU.
	gpuOf := func(pod *corev1.Pod) string {
		t.Helper()
		var gpu string
		realnodetest.Eventually(t, time.Minute, "an allocated slice for pod "+pod.Name, func() (bool, string) {
			cl := podClaim(t, env, pod)
			cl, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, cl.Name, metav1.GetOptions{})
			if err != nil || cl.Status.Allocation == nil {
				return false, errString(err)
			}
			d := cl.Status.Allocation.Devices.Results[0].Device // gpu-<index>-25pct-<n>
			gpu = strings.Split(d, "-")[1]
			return true, ""
		})
		return gpu
	}
	a := run("a")
	bad := gpuOf(a)
	realnodetest.Eventually(t, 2*time.Minute, "pod a running", func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "a", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, fmt.Sprintf("%v %v", errString(err), p.Status.Phase)
		}
		return true, ""
	})

	faults, err := os.OpenFile(simulate.FaultFile(node.StateDir()), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("the simulated driver's fault log: %v", err)
	}
	injected := time.Now()
	_, err = fmt.Fprintf(faults, "xid %s 79\n", bad)
	faults.Close()
	if err != nil {
		t.Fatal(err)
	}
	tainted := func(want bool) {
		t.Helper()
		realnodetest.Eventually(t, time.Minute, fmt.Sprintf("GPU %s's 7 devices tainted=%v", bad, want), func() (bool, string) {
			list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
			if err != nil {
				return false, err.Error()
			}
			n := 0
			for _, s := range list.Items {
				for _, d := range s.Spec.Devices {
					onBad := fmt.Sprint(*d.Attributes[contract.AttrIndex].IntValue) == bad
					has := len(d.Taints) == 1 && d.Taints[0].Key == contract.TaintUnhealthy && d.Taints[0].Value == "xid-79" && d.Taints[0].Effect == resourcev1.DeviceTaintEffectNoSchedule
					switch {
					case has && onBad:
						n++
					case len(d.Taints) > 0:
						return false, fmt.Sprintf("device %s: taints %v", d.Name, d.Taints)
					}
				}
			}
			if want {
				return n == 7, fmt.Sprintf("%d tainted", n)
			}
			return n == 0, fmt.Sprintf("%d tainted", n)
		})
	}
	tainted(true)
	t.Logf("XID 79 on GPU %s: its devices tainted %v after the line was written", bad, time.Since(injected).Round(time.Millisecond))

	for i := 1; i <= 4; i++ {
		p := run(fmt.Sprintf("b%d", i))
		if g := gpuOf(p); g == bad {
			t.Fatalf("pod %s got a slice of the tainted GPU %s", p.Name, g)
		}
	}
	fifth := run("b5")
	realnodetest.Eventually(t, time.Minute, "pod b5 unschedulable", func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "b5", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, ""
			}
		}
		return false, fmt.Sprint(p.Status.Conditions)
	})
	if p, err := client.CoreV1().Pods(ns).Get(ctx, "a", metav1.GetOptions{}); err == nil {
		for _, cs := range p.Status.ContainerStatuses {
			t.Logf("pod a's allocatedResourcesStatus (the kubelet's health stream, not this step's assertion): %+v", cs.AllocatedResourcesStatus)
		}
	}

	tainted(false)
	t.Logf("GPU %s untainted %v after the XID (--health-recovery=30s)", bad, time.Since(injected).Round(time.Millisecond))
	if g := gpuOf(fifth); g != bad {
		t.Fatalf("pod b5 got GPU %s after GPU %s recovered, want GPU %s (the only room)", g, bad, bad)
	}
}
