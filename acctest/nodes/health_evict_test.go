package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/maintenance"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// On a real node (kubelet, containerd, runc, two simulated V100s) whose
// plugin runs with --health-evict-after=5s, an XID on the GPU of a
// Deployment's pod taints that GPU's devices NoSchedule, then NoExecute;
// kube-controller-manager's device taint eviction controller deletes the
// pod, and its replacement runs on the other GPU, beside a plain pod left
// alone. `gpuslice gpu clear` then untaints the GPU at once, long before
// --health-recovery=10m, and `gpuslice gpu list` shows it healthy.
func TestXIDEvictsAndClearOnRealNode(t *testing.T) {
	h := startHealthNode(t, "real-evict", "health-evict", "v100-32gb:2", "--health-recovery=10m", "--health-evict-after=5s")
	ctx := context.Background()
	node := h.node.Name
	tmpl := h.template(&spec.Package{Name: "health-evict-v100-50pct", GPUModel: simulate.V100PCIe32GB.Name, Fraction: 50})
	w := evictWatch{h: h}

	// The plain pod first; its GPU drained (NoSchedule) while the
	// Deployment's pod is placed, so that pod lands on the other GPU.
	plain := h.run("plain", tmpl, "")
	_, good := h.allocated(plain)
	h.waitRunning(plain)
	cli(t, h.env, "gpu", "drain", fmt.Sprintf("%s/%d", node, good))
	if _, err := h.client.AppsV1().Deployments(h.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
				NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl)}},
				Containers: []corev1.Container{{
					Name: "app", Image: images.SliceCheck, Command: []string{"slice-check", "--sleep"},
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
				}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := w.webPod("")
	_, bad := h.allocated(first)
	h.waitRunning(first)
	cli(t, h.env, "gpu", "undrain", fmt.Sprintf("%s/%d", node, good))
	if bad == good {
		t.Fatalf("the Deployment's pod got GPU %d, which was drained for the plain pod", bad)
	}

	injected := h.inject(fmt.Sprintf("xid %d 79", bad))
	w.tainted(bad, resourcev1.DeviceTaintEffectNoSchedule)
	t.Logf("XID 79 on GPU %d -> its 7 devices tainted NoSchedule: %v", bad, time.Since(injected).Round(time.Millisecond))
	w.tainted(bad, resourcev1.DeviceTaintEffectNoExecute)
	t.Logf("XID -> NoExecute: %v (--health-evict-after=5s)", time.Since(injected).Round(time.Millisecond))
	w.deleting(first.Name)
	t.Logf("XID -> pod %s being deleted by the eviction controller: %v", first.Name, time.Since(injected).Round(time.Millisecond))
	w.gone(first.Name)
	t.Logf("XID -> pod %s gone: %v", first.Name, time.Since(injected).Round(time.Millisecond))
	replacement := w.webPod(first.Name)
	if _, g := h.allocated(replacement); g != good {
		t.Fatalf("replacement pod %s got GPU %d, want the healthy GPU %d", replacement.Name, g, good)
	}
	h.waitRunning(replacement)
	t.Logf("XID -> replacement %s running on GPU %d: %v", replacement.Name, good, time.Since(injected).Round(time.Millisecond))
	p, err := h.client.CoreV1().Pods(h.ns).Get(ctx, plain.Name, metav1.GetOptions{})
	if err != nil || p.UID != plain.UID || p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("the plain pod on the healthy GPU %d was not left alone: %v", good, err)
	}
	if got := gpuHealth(t, h.env, node, bad); got != "unhealthy: xid-79 (NoExecute)" {
		t.Errorf("gpu list: GPU %d health %q, want unhealthy: xid-79 (NoExecute)", bad, got)
	}

	cleared := time.Now()
	out := cli(t, h.env, "gpu", "clear", fmt.Sprintf("%s/%d", node, bad))
	t.Logf("gpuslice gpu clear %s/%d (%v):\n%s", node, bad, time.Since(cleared).Round(time.Millisecond), out)
	if !strings.Contains(out, "cleared "+contract.TaintUnhealthy+"=xid-79") || !strings.Contains(out, "healthy again") {
		t.Fatalf("gpu clear: %s", out)
	}
	w.untainted()
	t.Logf("clear -> GPU %d untainted: %v (--health-recovery=10m)", bad, time.Since(cleared).Round(time.Millisecond))
	if got := gpuHealth(t, h.env, node, bad); got != "healthy" {
		t.Errorf("gpu list after the clear: GPU %d health %q, want healthy", bad, got)
	}
}

// evictWatch follows the Deployment's pods and the node's slices.
type evictWatch struct{ h *healthNode }

// webPod waits for a pod of the Deployment other than not, not being
// deleted.
func (w evictWatch) webPod(not string) *corev1.Pod {
	w.h.t.Helper()
	var pod *corev1.Pod
	realnodetest.Eventually(w.h.t, time.Minute, "a pod of Deployment web besides "+not, func() (bool, string) {
		list, err := w.h.client.CoreV1().Pods(w.h.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		for i, p := range list.Items {
			if p.Name != not && p.DeletionTimestamp == nil {
				pod = &list.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods", len(list.Items))
	})
	return pod
}

func (w evictWatch) deleting(pod string) {
	w.h.t.Helper()
	realnodetest.Eventually(w.h.t, time.Minute, "pod "+pod+" evicted", func() (bool, string) {
		p, err := w.h.client.CoreV1().Pods(w.h.ns).Get(context.Background(), pod, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil), errString(err)
	})
}

func (w evictWatch) gone(pod string) {
	w.h.t.Helper()
	realnodetest.Eventually(w.h.t, time.Minute, "pod "+pod+" gone", func() (bool, string) {
		_, err := w.h.client.CoreV1().Pods(w.h.ns).Get(context.Background(), pod, metav1.GetOptions{})
		return apierrors.IsNotFound(err), errString(err)
	})
}

// tainted waits until GPU gpu's 7 devices, and only they, carry the node
// plugin's xid-79 taint with effect.
func (w evictWatch) tainted(gpu int64, effect resourcev1.DeviceTaintEffect) {
	w.h.t.Helper()
	w.slices(fmt.Sprintf("GPU %d's 7 devices tainted %s", gpu, effect), func(index int64, taints []resourcev1.DeviceTaint) bool {
		if index != gpu {
			return len(taints) == 0
		}
		return len(taints) == 1 && taints[0].Key == contract.TaintUnhealthy && taints[0].Value == "xid-79" && taints[0].Effect == effect
	})
}

func (w evictWatch) untainted() {
	w.h.t.Helper()
	w.slices("no device tainted", func(_ int64, taints []resourcev1.DeviceTaint) bool { return len(taints) == 0 })
}

// slices waits until ok holds for each of the 14 devices the node
// publishes.
func (w evictWatch) slices(what string, ok func(index int64, taints []resourcev1.DeviceTaint) bool) {
	w.h.t.Helper()
	realnodetest.Eventually(w.h.t, time.Minute, what, func() (bool, string) {
		list, err := w.h.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + w.h.node.Name})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, s := range list.Items {
			for _, d := range s.Spec.Devices {
				n++
				if !ok(*d.Attributes[contract.AttrIndex].IntValue, d.Taints) {
					return false, fmt.Sprintf("device %s: taints %v", d.Name, d.Taints)
				}
			}
		}
		return n == 14, fmt.Sprintf("%d devices", n)
	})
}

// gpuHealth is GPU gpu's health as `gpuslice gpu list -json` shows it.
func gpuHealth(t *testing.T, env *realnodetest.Env, node string, gpu int64) string {
	t.Helper()
	var gpus []maintenance.GPUState
	out := cli(t, env, "gpu", "list", "-json")
	if err := json.Unmarshal([]byte(out), &gpus); err != nil {
		t.Fatalf("gpu list -json: %v\n%s", err, out)
	}
	for _, g := range gpus {
		if g.Node == node && g.Index == gpu {
			return g.Health
		}
	}
	t.Fatalf("gpu list -json has no GPU %d of node %s:\n%s", gpu, node, out)
	return ""
}
