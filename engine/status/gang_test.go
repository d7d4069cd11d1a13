package status

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// The same gang as a PyTorchJob: ranks come from the operator's replica
// labels (Master 0, Worker i is rank i+1), and a job the operator has not
// finished reads its outcome from the PyTorchJob's conditions.
func TestDiagnosePyTorchJobGang(t *testing.T) {
	w := &spec.Workload{Namespace: "ml", Name: "ddp", Package: "a100", Kind: spec.KindJob, Replicas: 1, Workers: 3, GPUsPerPod: 1,
		TrainingOperator: spec.TrainingOperatorPyTorchJob}
	pod := func(typ, index, node string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "ddp-" + typ + "-" + index, Namespace: "ml", Labels: map[string]string{objects.LabelWorkload: "ddp",
				LabelTrainingJobName: "ddp", LabelTrainingReplicaType: typ, LabelTrainingReplicaIndex: index}},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
	}
	job := &unstructured.Unstructured{Object: map[string]any{}}
	s := Snapshot{
		pods:         map[string][]corev1.Pod{"ml": {pod("master", "0", "n1"), pod("worker", "1", "n2")}},
		claims:       map[string]map[string]*resourcev1.ResourceClaim{},
		operatorJobs: map[string]*unstructured.Unstructured{"ml/ddp": job},
	}
	st := s.Diagnose(w)
	if want := "2 of 3 workers have slices and hold them while the gang is incomplete; worker 1 waits: its pod is not created yet"; st.Message != want {
		t.Errorf("partly scheduled PyTorchJob: %q, want %q", st.Message, want)
	}

	s.pods = map[string][]corev1.Pod{}
	if st := s.Diagnose(w); st.Phase != Pending || !strings.HasPrefix(st.Message, "PyTorchJob ml/ddp has no pods yet: the Kubeflow Training Operator creates its 3 workers' pods") {
		t.Errorf("no pods: %s %q", st.Phase, st.Message)
	}

	job.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "Running", "status": "False"},
		map[string]any{"type": "Failed", "status": "True", "message": "PyTorchJob ddp has failed because 1 Worker replica(s) failed."},
	}}
	if st := s.Diagnose(w); st.Phase != Failed || st.Reason != JobFailed || !strings.Contains(st.Message, "1 Worker replica(s) failed") {
		t.Errorf("failed: %s %s %q", st.Phase, st.Reason, st.Message)
	}
	if st := (&Snapshot{pods: map[string][]corev1.Pod{}}).Diagnose(w); st.Phase != Missing || !strings.HasPrefix(st.Message, "PyTorchJob ml/ddp does not exist") {
		t.Errorf("missing: %s %q", st.Phase, st.Message)
	}
}
