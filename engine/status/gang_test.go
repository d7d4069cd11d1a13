package status

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// A gang with worker 1 not created and worker 2 unschedulable: the
// message counts the workers that hold slices and names each one waiting.
func TestDiagnosePartlyScheduledGang(t *testing.T) {
	w := &spec.Workload{Namespace: "ml", Name: "ddp", Package: "a100", Kind: spec.KindJob, Replicas: 1, Workers: 4, GPUsPerPod: 2}
	worker := func(index, node string, conditions ...corev1.PodCondition) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "ddp-" + index + "-x", Namespace: "ml", Labels: map[string]string{objects.LabelWorkload: "ddp"},
				Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: index}},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conditions},
		}
	}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/3 nodes are available: 3 cannot allocate all claims."}
	s := Snapshot{
		pods:   map[string][]corev1.Pod{"ml": {worker("0", "n1"), worker("3", "n2"), worker("2", "", unschedulable)}},
		claims: map[string]map[string]*resourcev1.ResourceClaim{},
		jobs:   map[string]*batchv1.Job{"ml/ddp": {}},
	}
	st := s.Diagnose(w)
	want := "2 of 4 workers have slices and hold them while the gang is incomplete; worker 1 waits: its pod is not created yet; " +
		"worker 2 waits: waiting for free slices: pod ddp-2-x needs 2 free a100 slices on one node and no node has them; it stays Pending until they free (quota is an entitlement, not a reservation)"
	if st.Phase != Pending || st.Replicas != 4 || st.Scheduled != 2 || st.Message != want {
		t.Fatalf("got %s %d/%d %q\nwant %q", st.Phase, st.Scheduled, st.Replicas, st.Message, want)
	}
}
