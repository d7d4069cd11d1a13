package engine_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/maintenance"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/status"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

const deviceHealthHCL = `
resource "gpuslice_package" "whole" {
  name      = "devhealth-32gi"
  gpu_model = "Tesla V100-SXM2-32GB"
  fraction  = 100
}

resource "gpuslice_quota" "q" {
  namespace       = "devhealth"
  slices          = { (gpuslice_package.whole.name) = 1 }
  cpu_requests    = "1"
  memory_requests = "2Gi"
}

resource "gpuslice_workload" "infer" {
  namespace = gpuslice_quota.q.namespace
  name      = "infer"
  package   = gpuslice_package.whole.name
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "100m"
    memory_request = "256Mi"
  }
}
`

// TestStatusNamesUnhealthyDevices: when the kubelet reports a workload's
// allocated slice unhealthy in its pod's allocatedResourcesStatus (as it
// does from the node plugin's health stream), the workload's status names
// the pod, container, claim and device, and why; a healthy report of it
// names nothing. Once the node plugin taints the GPU, the engine's GPU
// list has it unhealthy, with the reason and the slice still on it.
func TestStatusNamesUnhealthyDevices(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	opts := publish.Options{Fractions: []int{100}}
	n, err := simnode.Start(ctx, c, "devhealth-node", simulate.Spec{Profile: "v100-sxm2-32gb", Count: 1}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	if _, err := simnode.Published(ctx, c.Client(), []*simnode.Node{n}, time.Now(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	s := loadStack(t, "devhealth", deviceHealthHCL)
	mustApply(t, e, s)
	const addr = "gpuslice_workload.infer"

	// The pod is bound with its slice; nothing runs it (a simulated node has
	// no kubelet), so the test writes the status a kubelet would.
	var pod *corev1.Pod
	var claim, device string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client().CoreV1().Pods("devhealth").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.NodeName == "" || len(pods.Items[0].Status.ResourceClaimStatuses) != 1 {
			return false, err
		}
		pod = &pods.Items[0]
		claim = *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
		cl, err := c.Client().ResourceV1().ResourceClaims("devhealth").Get(ctx, claim, metav1.GetOptions{})
		if err != nil || cl.Status.Allocation == nil {
			return false, err
		}
		r := cl.Status.Allocation.Devices.Results[0]
		device = r.Pool + "/" + r.Device
		return true, nil
	})
	if err != nil {
		t.Fatalf("the workload's pod with its slice: %v", err)
	}
	report := func(health corev1.ResourceHealthStatus, message string) {
		t.Helper()
		h := corev1.ResourceHealth{ResourceID: corev1.ResourceID(contract.DriverName + "/" + device), Health: health}
		if message != "" {
			h.Message = ptr.To(message)
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := c.Client().CoreV1().Pods("devhealth").Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
			}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{
				Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
				AllocatedResourcesStatus: []corev1.ResourceStatus{{
					Name:      corev1.ResourceName("claim:" + render.ClaimName),
					Resources: []corev1.ResourceHealth{h},
				}},
			}}
			_, err = c.Client().CoreV1().Pods("devhealth").UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitStatus := func(what string, ok func(status.Status) bool) status.Status {
		t.Helper()
		var st status.Status
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			all, err := e.Status(ctx, s)
			if err != nil {
				return false, err
			}
			st = all[addr]
			return ok(st), nil
		})
		if err != nil {
			t.Fatalf("%s: %v; status %+v", what, err, st)
		}
		return st
	}

	report(corev1.ResourceHealthStatusHealthy, "")
	waitStatus("a healthy report read", func(st status.Status) bool { return st.Ready == 1 && len(st.UnhealthyDevices) == 0 })
	const why = "GPU 0 (xid-79): critical XID 79: GPU has fallen off the bus"
	report(corev1.ResourceHealthStatusUnhealthy, why)
	st := waitStatus("the unhealthy device named", func(st status.Status) bool { return len(st.UnhealthyDevices) > 0 })
	want := status.DeviceHealth{Pod: pod.Name, Container: pod.Spec.Containers[0].Name, Claim: claim, Device: device, Health: "Unhealthy", Message: why}
	if len(st.UnhealthyDevices) != 1 || st.UnhealthyDevices[0] != want {
		t.Errorf("unhealthy devices %+v, want %+v", st.UnhealthyDevices, want)
	}

	// The node plugin taints the GPU: the engine lists it unhealthy with the
	// slice still on it.
	n.PublishTainted(opts, publish.Taints{n.UUID(0): {{Key: contract.TaintUnhealthy, Value: "xid-79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}})
	var gpu maintenance.GPUState
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		gpus, err := e.GPUStates(ctx)
		for _, g := range gpus {
			if g.Node == n.Name && g.Index == 0 {
				gpu = g
			}
		}
		return gpu.Unhealthy(), err
	})
	if err != nil || gpu.HealthReason != "xid-79" || len(gpu.Claims) != 1 || gpu.Claims[0] != "devhealth/"+claim {
		t.Errorf("GPU 0 of %s: %+v (%v), want unhealthy (xid-79) holding devhealth/%s", n.Name, gpu, err, claim)
	}
}
