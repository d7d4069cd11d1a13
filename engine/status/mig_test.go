package status

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// A ready workload on a MIG package says it runs on MIG instances,
// isolated by the GPU, and names the instance; a fraction's does not. (A
// ready pod needs a kubelet; the snapshot is built as one would report it.)
func TestDiagnoseReadyOnMIG(t *testing.T) {
	w := &spec.Workload{Namespace: "team-a", Name: "llm", Package: "a100-1g", Kind: spec.KindDeployment, Replicas: 1}
	snap := func(class *resourcev1.DeviceClass) Snapshot {
		pod := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "llm-abc", Namespace: "team-a", Labels: map[string]string{objects.LabelWorkload: "llm"}},
			Spec:       corev1.PodSpec{NodeName: "a100-node"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("llm-abc-gpu")}}},
		}
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "llm-abc-gpu", Namespace: "team-a"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name, Count: 1}}}}},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: contract.DriverName, Pool: "a100-node", Device: contract.MIGDeviceName(0, "1g.5gb", 2)}}}}},
		}
		return Snapshot{
			pods:        map[string][]corev1.Pod{"team-a": {pod}},
			claims:      map[string]map[string]*resourcev1.ResourceClaim{"team-a": {claim.Name: claim}},
			deployments: map[string]*appsv1.Deployment{"team-a/llm": {}},
			classes:     map[string]*resourcev1.DeviceClass{class.Name: class},
		}
	}
	mig := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "a100-1g", Annotations: map[string]string{
		contract.AnnotationSharing: contract.SharingMIG, contract.AnnotationMIGProfile: "1g.5gb"}}}
	s := snap(mig)
	st := s.Diagnose(w)
	if st.Phase != Running || st.Device != "gpu-0-mig-1g-5gb-2" ||
		!strings.Contains(st.Message, "1/1 replicas ready on MIG 1g.5gb instances: memory and compute isolated by the GPU (hardware isolation)") {
		t.Errorf("MIG workload: %s %s %q", st.Phase, st.Device, st.Message)
	}
	fraction := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "a100-1g", Annotations: map[string]string{contract.AnnotationFraction: "25"}}}
	s = snap(fraction)
	if st := s.Diagnose(w); st.Message != "1/1 replicas ready" {
		t.Errorf("fraction workload: %q", st.Message)
	}
}
