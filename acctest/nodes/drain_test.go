package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/engine/maintenance"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// drainHCL is a 25 % package of the V100 SXM2 (only the drain test's node
// has that card, so every slice lands there) and deployments of it with
// the given replicas, by name. slice-check exits on SIGTERM, as a
// well-behaved server does, so an eviction takes no grace period.
func drainHCL(ns string, replicas map[string]int) string {
	hcl := `
resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "quarter" {
  name      = "` + ns + `-sxm2-25pct"
  gpu_model = "Tesla V100-SXM2-32GB"
  fraction  = 25
}

resource "gpuslice_quota" "team" {
  namespace       = "` + ns + `"
  slices          = { (gpuslice_package.quarter.name) = 8 }
  cpu_requests    = "2"
  memory_requests = "2Gi"
}
`
	for _, name := range []string{"train", "serve"} {
		n, ok := replicas[name]
		if !ok {
			continue
		}
		hcl += fmt.Sprintf(`
resource "gpuslice_workload" %q {
  namespace = gpuslice_quota.team.namespace
  name      = %q
  package   = gpuslice_package.quarter.name
  kind      = "deployment"
  replicas  = %d
  container {
    image          = "registry.gpuslice.test/slice-check:1"
    command        = ["slice-check", "--sleep"]
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`, name, name, n)
	}
	return hcl
}

// `gpuslice gpu drain NODE/GPU -evict` on a real node (kubelet,
// containerd, runc, two simulated V100 SXM2s): the device taint eviction
// controller deletes the workload's pod on the drained GPU and its
// replacement runs on the other GPU, while the other workload's pod there
// keeps running untouched; a drain without -evict lets running pods be;
// `undrain` removes the rules and new slices land on the GPU again.
func TestDrainEvictsOnlyTheDrainedGPUsPods(t *testing.T) {
	shared := realnodetest.Shared(t)
	env := realnodetest.Start(t, shared.Cluster, realnodetest.Options{Names: []string{"real-drain"}, GPUs: "v100-sxm2-32gb:2"})
	node := env.Nodes[0].Name
	client := shared.Cluster.Client()
	ctx := context.Background()
	const ns = "drained"
	gpu := func(i int) string { return fmt.Sprintf("%s/%d", node, i) }
	t.Cleanup(func() {
		// A failed step may leave a drain; the node goes with the test, its rules must too.
		_, _ = maintenance.Undrain(context.Background(), client, maintenance.Target{Node: node})
	})

	// Steer each workload to its GPU with NoSchedule drains: train on GPU 0, serve on GPU 1.
	cli(t, env, "gpu", "drain", gpu(1))
	dir := applyStack(t, env, ns, drainHCL(ns, map[string]int{"train": 1}))
	train := runningOn(t, env, ns, "app.kubernetes.io/name=train", 1)
	if g := train[0].gpu; g != "0" {
		t.Fatalf("train's pod got GPU %s while GPU 1 was drained", g)
	}
	cli(t, env, "gpu", "undrain", gpu(1))
	out := cli(t, env, "gpu", "drain", gpu(0))
	if !strings.Contains(out, "keep running") {
		t.Errorf("drain without -evict does not say running pods stay:\n%s", out)
	}
	reapply(t, env, dir, ns, drainHCL(ns, map[string]int{"train": 1, "serve": 1}))
	serve := runningOn(t, env, ns, "app.kubernetes.io/name=serve", 1)
	if g := serve[0].gpu; g != "1" {
		t.Fatalf("serve's pod got GPU %s while GPU 0 was drained", g)
	}
	if now := runningOn(t, env, ns, "app.kubernetes.io/name=train", 1); now[0].pod.UID != train[0].pod.UID {
		t.Fatalf("a NoSchedule drain replaced train's pod %s with %s", train[0].pod.Name, now[0].pod.Name)
	}

	started := time.Now()
	out = cli(t, env, "gpu", "drain", gpu(0), "-evict")
	if !strings.Contains(out, "NoExecute") {
		t.Errorf("drain -evict output does not name the NoExecute effect:\n%s", out)
	}
	marked := gone(t, env, train[0].pod)
	evicted := time.Since(started)
	moved := runningOn(t, env, ns, "app.kubernetes.io/name=train", 1)
	if moved[0].gpu != "1" || moved[0].pod.UID == train[0].pod.UID {
		t.Fatalf("train after drain -evict of GPU 0: pod %s on GPU %s, want a new pod on GPU 1", moved[0].pod.Name, moved[0].gpu)
	}
	t.Logf("drain -evict of GPU 0: pod %s marked for deletion %v and gone %v after the command started, replacement %s running on GPU 1 %v after",
		train[0].pod.Name, marked.Sub(started).Round(time.Millisecond), evicted.Round(time.Millisecond), moved[0].pod.Name, time.Since(started).Round(time.Millisecond))
	left := runningOn(t, env, ns, "app.kubernetes.io/name=serve", 1)
	if n := restarts(t, env, left[0].pod); left[0].pod.UID != serve[0].pod.UID || n != 0 {
		t.Fatalf("serve's pod on GPU 1 was touched by the drain of GPU 0: now %s (%d restarts), was %s", left[0].pod.Name, n, serve[0].pod.Name)
	}
	if s := gpuState(t, env, node, 0); s.Drained != "NoExecute" || len(s.Claims) != 0 {
		t.Errorf("gpu list for drained GPU 0: %+v, want drained NoExecute with no claims left", s)
	}

	cli(t, env, "gpu", "undrain", gpu(0))
	rules, err := client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: maintenance.LabelDrain + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules.Items {
		if r.Annotations[maintenance.AnnotationNode] == node {
			t.Errorf("DeviceTaintRule %s of %s is left after undrain", r.Name, node)
		}
	}
	// GPU 1 has room for two more quarters; four more pods need GPU 0 again.
	reapply(t, env, dir, ns, drainHCL(ns, map[string]int{"train": 5, "serve": 1}))
	onGPU0 := 0
	for _, p := range runningOn(t, env, ns, "app.kubernetes.io/name=train", 5) {
		if p.gpu == "0" {
			onGPU0++
		}
	}
	if onGPU0 < 2 {
		t.Fatalf("%d of train's pods on GPU 0 after undrain, want at least 2 (GPU 1 holds only 4 quarters)", onGPU0)
	}
}

// placed is a running pod and the index of the GPU of its slice.
type placed struct {
	pod *corev1.Pod
	gpu string
}

// runningOn waits until n pods match selector in ns, all running with an
// allocated slice, and returns them with their GPUs.
func runningOn(t *testing.T, env *realnodetest.Env, ns, selector string, n int) []placed {
	t.Helper()
	client := env.Cluster.Client()
	var out []placed
	realnodetest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d running pods %s", n, selector), func() (bool, string) {
		list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		out = out[:0]
		var state []string
		for i := range list.Items {
			p := &list.Items[i]
			state = append(state, fmt.Sprintf("%s %s deleting=%v", p.Name, p.Status.Phase, p.DeletionTimestamp != nil))
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || len(p.Status.ResourceClaimStatuses) == 0 {
				continue
			}
			claim, err := client.ResourceV1().ResourceClaims(ns).Get(context.Background(), *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
			if err != nil || claim.Status.Allocation == nil {
				continue
			}
			// Device names are gpu-<index>-<size>-<n>.
			out = append(out, placed{pod: p, gpu: strings.Split(claim.Status.Allocation.Devices.Results[0].Device, "-")[1]})
		}
		return len(out) == n && len(list.Items) == n, strings.Join(state, "; ")
	})
	return out
}

// gone waits until the pod is deleted and returns when it was first seen
// marked for deletion.
func gone(t *testing.T, env *realnodetest.Env, pod *corev1.Pod) time.Time {
	t.Helper()
	var marked time.Time
	realnodetest.Eventually(t, 2*time.Minute, "pod "+pod.Name+" deleted", func() (bool, string) {
		p, err := env.Cluster.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != pod.UID) {
			if marked.IsZero() {
				marked = time.Now()
			}
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		if p.DeletionTimestamp != nil && marked.IsZero() {
			marked = time.Now()
		}
		return false, fmt.Sprintf("%s deleting=%v", p.Status.Phase, p.DeletionTimestamp != nil)
	})
	return marked
}

// gpuState is GPU index of node as `gpuslice gpu list -json` prints it.
func gpuState(t *testing.T, env *realnodetest.Env, node string, index int64) maintenance.GPUState {
	t.Helper()
	var gpus []maintenance.GPUState
	if err := json.Unmarshal([]byte(cli(t, env, "gpu", "list", "-json")), &gpus); err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		if g.Node == node && g.Index == index {
			return g
		}
	}
	t.Fatalf("gpu list -json has no GPU %d of %s", index, node)
	return maintenance.GPUState{}
}
