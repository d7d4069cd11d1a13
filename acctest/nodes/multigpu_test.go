package nodes

import (
	"context"
	"regexp"
	"slices"
	"strconv"
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

// showGPUs prints what a container sees of its GPUs (environment, device
// nodes, nvidia-smi), then runs slice-check on the first GPU.
const showGPUs = `export -p
for f in /dev/nvidia*; do printf 'dev: %s\n' "$f"; done
nvidia-smi
exec slice-check --sleep`

// A pod whose claim asks for four whole GPUs (one request, count 4 of the
// 100 % class, the shape the engine's gpus_per_pod renders) runs on a real
// node with four simulated V100s: one CDI spec gives its container every
// GPU's device node and all four UUIDs, the budget is the four GPUs'
// memory without pacing, the first GPU can be filled, and deleting the pod
// unprepares the claim.
func TestMultiGPUPodOnRealNode(t *testing.T) {
	shared := realnodetest.Shared(t)
	env := realnodetest.Start(t, shared.Cluster, realnodetest.Options{Names: []string{"real-4gpu"}, GPUs: "v100-32gb:4"})
	node := env.Nodes[0]
	ctx := context.Background()
	client := shared.Cluster.Client()

	ns, class := "multigpu", "multigpu-v100-whole"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	whole := &spec.Package{Name: class, GPUModel: simulate.V100PCIe32GB.Name, Fraction: contract.ComputeWhole}
	_, err := client.ResourceV1().DeviceClasses().Create(ctx, render.DeviceClass(whole), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.ResourceV1().DeviceClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	// Written with client-go: the engine's gpus_per_pod renders this shape.
	_, err = client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: 4}}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"kubernetes.io/hostname": node.Name},
			RestartPolicy:  corev1.RestartPolicyNever,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("train")}},
			Containers: []corev1.Container{{
				Name: "train", Image: images.SliceCheck, Command: []string{"sh", "-c", showGPUs},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := logsWith(t, shared, pod, "train", "slice-check: the slice held")
	t.Logf("the container's output:\n%s", logs)

	uid := claimUID(t, shared, pod)
	claimName := claimNameOf(t, shared, pod)
	cl, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var devices []string
	for _, r := range cl.Status.Allocation.Devices.Results {
		devices = append(devices, r.Device)
	}
	slices.Sort(devices)
	if want := []string{"gpu-0-100pct-1", "gpu-1-100pct-1", "gpu-2-100pct-1", "gpu-3-100pct-1"}; !slices.Equal(devices, want) {
		t.Errorf("claim allocated %v, want the node's four GPUs %v", devices, want)
	}

	// The container got the one spec's edits: all four GPUs.
	spec := cdiSpec(t, node, uid)
	if len(spec.Devices) != 1 {
		t.Fatalf("CDI spec devices %+v, want the claim's one", spec.Devices)
	}
	edits := spec.Devices[0].ContainerEdits
	for _, kv := range edits.Env {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.Contains(logs, "export "+name+"='"+value+"'") {
			t.Errorf("container environment lacks %s from the CDI spec:\n%s", kv, logs)
		}
	}
	var visible string
	for _, kv := range edits.Env {
		if v, ok := strings.CutPrefix(kv, "CUDA_VISIBLE_DEVICES="); ok {
			visible = v
		}
	}
	if uuids := strings.Split(visible, ","); len(uuids) != 4 || slices.Contains(uuids, "") {
		t.Errorf("CUDA_VISIBLE_DEVICES=%s, want four GPU UUIDs", visible)
	}
	for _, want := range []string{contract.EnvMemoryLimit + "=" + strconv.FormatUint(4*32<<30, 10), contract.EnvComputeShare + "=100"} {
		if !contains(edits.Env, want) {
			t.Errorf("CDI spec environment %v lacks %s (four whole GPUs)", edits.Env, want)
		}
	}
	for _, dev := range []string{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3", "/dev/nvidiactl"} {
		if !strings.Contains(logs, "dev: "+dev+"\n") {
			t.Errorf("container has no %s:\n%s", dev, logs)
		}
	}
	// The first GPU is whole: its full memory, and allocations up to it.
	if !strings.Contains(logs, "32768 MiB total") {
		t.Errorf("slice-check does not see a whole 32 GiB GPU:\n%s", logs)
	}
	if m := regexp.MustCompile(`allocated (\d+) MiB`).FindStringSubmatch(logs); m == nil {
		t.Errorf("no allocation reported:\n%s", logs)
	} else if mib, _ := strconv.Atoi(m[1]); mib < 30000 {
		t.Errorf("allocated %d MiB on a whole 32 GiB GPU, want nearly all of it", mib)
	}

	// The claim's status holds the four GPUs, each prepared.
	realnodetest.Eventually(t, time.Minute, "the four devices in the claim's status", func() (bool, string) {
		c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, d := range c.Status.Devices {
			if d.Driver == contract.DriverName && len(d.Conditions) == 1 && d.Conditions[0].Status == metav1.ConditionTrue {
				n++
			}
		}
		return n == 4, strconv.Itoa(n) + " devices reported"
	})

	if err := client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitUnprepared(t, node, uid)
}

// claimNameOf is the name of the pod's only resource claim.
func claimNameOf(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) string {
	t.Helper()
	p, err := env.Cluster.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil || len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s: no claim: %v", pod.Name, err)
	}
	return *p.Status.ResourceClaimStatuses[0].ResourceClaimName
}
