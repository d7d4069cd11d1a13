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
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// healthNode is one real node of a health test, with the namespace its
// pods run in.
type healthNode struct {
	t      *testing.T
	env    *realnodetest.Env
	node   *realnode.Node
	client kubernetes.Interface
	ns     string
}

// startHealthNode starts a real node named name with gpus and the node
// plugin's args, on the package's control plane, and a namespace ns.
func startHealthNode(t *testing.T, name, ns, gpus string, args ...string) *healthNode {
	t.Helper()
	shared := realnodetest.Shared(t)
	env := realnodetest.Start(t, shared.Cluster, realnodetest.Options{Names: []string{name}, GPUs: gpus, PluginArgs: args})
	h := &healthNode{t: t, env: env, node: env.Nodes[0], client: shared.Cluster.Client(), ns: ns}
	if _, err := h.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return h
}

// template creates pkg's device class as the engine renders it and a claim
// template of one device of it, named after the package.
func (h *healthNode) template(pkg *spec.Package) string {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.client.ResourceV1().DeviceClasses().Create(ctx, render.DeviceClass(pkg), metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		_ = h.client.ResourceV1().DeviceClasses().Delete(context.Background(), pkg.Name, metav1.DeleteOptions{})
	})
	req := resourcev1.ExactDeviceRequest{DeviceClassName: pkg.Name, Count: 1}
	if c := render.CapacityRequests(pkg); c != nil {
		req.Capacity = &resourcev1.CapacityRequirements{Requests: c}
	}
	if _, err := h.client.ResourceV1().ResourceClaimTemplates(h.ns).Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: pkg.Name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &req}},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	return pkg.Name
}

// run creates a pod on the node with a claim from template, its container
// asking for the claim's request (the whole claim, as the engine's
// workloads ask, when request is "").
func (h *healthNode) run(name, template, request string) *corev1.Pod {
	h.t.Helper()
	pod, err := h.client.CoreV1().Pods(h.ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"kubernetes.io/hostname": h.node.Name},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}},
			Containers: []corev1.Container{{
				Name: "app", Image: images.SliceCheck, Command: []string{"slice-check", "--sleep"},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu", Request: request}}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return pod
}

// allocated waits until the pod's claim is allocated and returns the
// claim and its device's GPU index.
func (h *healthNode) allocated(pod *corev1.Pod) (*resourcev1.ResourceClaim, int64) {
	h.t.Helper()
	var claim *resourcev1.ResourceClaim
	realnodetest.Eventually(h.t, time.Minute, "an allocated slice for pod "+pod.Name, func() (bool, string) {
		cl, err := h.client.ResourceV1().ResourceClaims(h.ns).Get(context.Background(), podClaim(h.t, h.env, pod).Name, metav1.GetOptions{})
		if err != nil || cl.Status.Allocation == nil {
			return false, errString(err)
		}
		claim = cl
		return true, ""
	})
	return claim, h.gpuOfDevice(claim.Status.Allocation.Devices.Results[0].Device)
}

// gpuOfDevice is the GPU index the node's slices publish device name on.
func (h *healthNode) gpuOfDevice(name string) int64 {
	h.t.Helper()
	list, err := h.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + h.node.Name})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				return *d.Attributes[contract.AttrIndex].IntValue
			}
		}
	}
	h.t.Fatalf("device %s is in none of node %s's ResourceSlices", name, h.node.Name)
	return -1
}

// waitRunning waits until the pod runs.
func (h *healthNode) waitRunning(pod *corev1.Pod) {
	h.t.Helper()
	realnodetest.Eventually(h.t, 2*time.Minute, "pod "+pod.Name+"'s container running", func() (bool, string) {
		p, err := h.client.CoreV1().Pods(h.ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		// The phase stays Running through a crash loop: ask the container.
		running := len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
		return p.Status.Phase == corev1.PodRunning && running, fmt.Sprintf("%v %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
}

// waitUnschedulable waits until the scheduler finds no room for the pod.
func (h *healthNode) waitUnschedulable(pod *corev1.Pod) {
	h.t.Helper()
	realnodetest.Eventually(h.t, time.Minute, "pod "+pod.Name+" unschedulable", func() (bool, string) {
		p, err := h.client.CoreV1().Pods(h.ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
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
}

// inject appends a line to the simulated driver's fault log and returns
// when it was written.
func (h *healthNode) inject(line string) time.Time {
	h.t.Helper()
	faults, err := os.OpenFile(simulate.FaultFile(h.node.StateDir()), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		h.t.Fatalf("the simulated driver's fault log: %v", err)
	}
	defer faults.Close()
	written := time.Now()
	if _, err := fmt.Fprintln(faults, line); err != nil {
		h.t.Fatalf("write %q to the simulated driver's fault log: %v", line, err)
	}
	return written
}

// waitTaints waits until exactly the n devices of GPU gpu carry the
// unhealthy NoSchedule taint with value reason ("" and n 0: no device
// is tainted), and returns the names of the tainted devices.
func (h *healthNode) waitTaints(gpu int64, reason string, n int) []string {
	h.t.Helper()
	var tainted []string
	realnodetest.Eventually(h.t, time.Minute, fmt.Sprintf("GPU %d's %d devices tainted %q, no other", gpu, n, reason), func() (bool, string) {
		list, err := h.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + h.node.Name})
		if err != nil {
			return false, err.Error()
		}
		tainted = nil
		for _, s := range list.Items {
			for _, d := range s.Spec.Devices {
				onGPU := *d.Attributes[contract.AttrIndex].IntValue == gpu
				has := len(d.Taints) == 1 && d.Taints[0].Key == contract.TaintUnhealthy && d.Taints[0].Value == reason && d.Taints[0].Effect == resourcev1.DeviceTaintEffectNoSchedule
				switch {
				case has && onGPU && reason != "":
					tainted = append(tainted, d.Name)
				case len(d.Taints) > 0:
					return false, fmt.Sprintf("device %s: taints %v", d.Name, d.Taints)
				}
			}
		}
		return len(tainted) == n, fmt.Sprintf("tainted: %v", tainted)
	})
	return tainted
}

// waitPodHealth waits until the pod's container shows its allocated device
// (the claim's CDI device, in the resource the kubelet names after the
// pod's claim and the request the container asks for) with health want and a
// message holding every part of msg, and returns what it shows.
func (h *healthNode) waitPodHealth(pod *corev1.Pod, claim *resourcev1.ResourceClaim, want corev1.ResourceHealthStatus, msg ...string) string {
	h.t.Helper()
	id := corev1.ResourceID(cdispec.DeviceID(string(claim.UID)))
	name := corev1.ResourceName("claim:gpu")
	if r := pod.Spec.Containers[0].Resources.Claims[0].Request; r != "" {
		name += corev1.ResourceName("/" + r)
	}
	var shown string
	realnodetest.Eventually(h.t, 2*time.Minute, fmt.Sprintf("pod %s's device %s %s in its status", pod.Name, id, want), func() (bool, string) {
		p, err := h.client.CoreV1().Pods(h.ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(p.Status.ContainerStatuses) != 1 {
			return false, fmt.Sprintf("container statuses %+v", p.Status.ContainerStatuses)
		}
		st := p.Status.ContainerStatuses[0].AllocatedResourcesStatus
		if len(st) != 1 || st[0].Name != name || len(st[0].Resources) != 1 {
			return false, fmt.Sprintf("allocatedResourcesStatus %+v", st)
		}
		r := st[0].Resources[0]
		got := fmt.Sprintf("%s: %s %s, message %q", st[0].Name, r.ResourceID, r.Health, ptr.Deref(r.Message, ""))
		shown = got
		if r.ResourceID != id || r.Health != want {
			return false, got
		}
		for _, m := range msg {
			if !strings.Contains(ptr.Deref(r.Message, ""), m) {
				return false, got
			}
		}
		return true, got
	})
	return shown
}
