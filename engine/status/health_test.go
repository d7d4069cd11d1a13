package status

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The kubelet's names for a claim ("claim:<pod's name>" or with
// "/<request>") map to the pod's ResourceClaim; another driver's devices
// and healthy ones are left out; Unknown counts, init containers too.
func TestUnhealthyDevicesOfPods(t *testing.T) {
	health := func(id string, h corev1.ResourceHealthStatus, msg *string) corev1.ResourceHealth {
		return corev1.ResourceHealth{ResourceID: corev1.ResourceID(id), Health: h, Message: msg}
	}
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Status: corev1.PodStatus{
			ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x1")}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "sidecar", AllocatedResourcesStatus: []corev1.ResourceStatus{{
				Name: "claim:gpu", Resources: []corev1.ResourceHealth{health("gpuslice.dev/n1/gpu-0-25pct-1", corev1.ResourceHealthStatusUnknown, nil)},
			}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", AllocatedResourcesStatus: []corev1.ResourceStatus{
				{Name: "claim:gpu/gpu", Resources: []corev1.ResourceHealth{
					health("gpuslice.dev/n1/gpu-0-25pct-1", corev1.ResourceHealthStatusUnhealthy, ptr.To("GPU 0 (xid-79): critical XID 79")),
					health("gpuslice.dev/n1/gpu-1-25pct-1", corev1.ResourceHealthStatusHealthy, nil),
					health("other.example.com/n1/nic-0", corev1.ResourceHealthStatusUnhealthy, nil),
				}},
				{Name: "nvidia.com/gpu", Resources: []corev1.ResourceHealth{health("GPU-abc", corev1.ResourceHealthStatusUnhealthy, nil)}},
			}}},
		},
	}
	want := []DeviceHealth{
		{Pod: "p", Container: "sidecar", Claim: "p-gpu-x1", Device: "n1/gpu-0-25pct-1", Health: "Unknown"},
		{Pod: "p", Container: "main", Claim: "p-gpu-x1", Device: "n1/gpu-0-25pct-1", Health: "Unhealthy", Message: "GPU 0 (xid-79): critical XID 79"},
	}
	if got := unhealthyDevices([]corev1.Pod{pod}); !reflect.DeepEqual(got, want) {
		t.Errorf("unhealthy devices:\n got %+v\nwant %+v", got, want)
	}
}
