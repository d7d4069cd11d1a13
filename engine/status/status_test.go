package status

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// These cases need a kubelet to happen for real; the snapshot is built as
// the kubelet would report them.
func TestDiagnoseContainerProblems(t *testing.T) {
	w := &spec.Workload{Namespace: "team-a", Name: "ollama", Package: "v100-8gi", Kind: spec.KindDeployment, Replicas: 1,
		Container: spec.Container{MemoryLimit: "512Mi"}}
	running := func(cs corev1.ContainerStatus) Snapshot {
		pod := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "ollama-abc", Namespace: "team-a", Labels: map[string]string{objects.LabelWorkload: "ollama"}},
			Spec:       corev1.PodSpec{NodeName: "gpu-node-1"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{cs}},
		}
		return Snapshot{
			pods:        map[string][]corev1.Pod{"team-a": {pod}},
			claims:      map[string]map[string]*resourcev1.ResourceClaim{},
			deployments: map[string]*appsv1.Deployment{"team-a/ollama": {}},
		}
	}
	cases := []struct {
		name   string
		cs     corev1.ContainerStatus
		reason Reason
		phase  Phase
		says   string
	}{
		{"OOMKilled loading a model", corev1.ContainerStatus{RestartCount: 1, LastTerminationState: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}},
			OOMKilled, Failed, "OOMKilled (exit 137) by its RAM limit (container.memory_limit: 512Mi) — the container's memory, not the GPU slice"},
		{"image cannot be pulled", corev1.ContainerStatus{Image: "ollama/ollama:9.9.9", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "manifest unknown"}}},
			ImagePullError, Failed, "cannot pull image ollama/ollama:9.9.9 (ImagePullBackOff: manifest unknown)"},
		{"crash loop", corev1.ContainerStatus{RestartCount: 5, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "device kernel image is invalid"}}},
			CrashLoop, Failed, "last exit code 1 (Error) device kernel image is invalid"},
		{"running but not ready", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			Progressing, Pending, "is Running and not ready yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := running(tc.cs)
			st := s.Diagnose(w)
			if st.Reason != tc.reason || st.Phase != tc.phase || !strings.Contains(st.Message, tc.says) {
				t.Fatalf("got %s/%s %q, want %s/%s containing %q", st.Phase, st.Reason, st.Message, tc.phase, tc.reason, tc.says)
			}
		})
	}
}

func TestDiagnoseJobsAndMissing(t *testing.T) {
	w := &spec.Workload{Namespace: "ml", Name: "train", Kind: spec.KindJob, Replicas: 1}
	s := Snapshot{jobs: map[string]*batchv1.Job{}}
	if st := s.Diagnose(w); st.Phase != Missing || st.Reason != NotApplied {
		t.Errorf("missing job: %+v", st)
	}
	s.jobs["ml/train"] = &batchv1.Job{Status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	if st := s.Diagnose(w); st.Phase != Succeeded || st.Reason != Completed {
		t.Errorf("complete job: %+v", st)
	}
	s.jobs["ml/train"] = &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Message: "BackoffLimitExceeded"}}}}
	if st := s.Diagnose(w); st.Phase != Failed || st.Reason != JobFailed || !strings.Contains(st.Message, "BackoffLimitExceeded") {
		t.Errorf("failed job: %+v", st)
	}
}

// The provider's state and the CLI's outputs read the same attributes:
// reason is the message with what to do, the one-word reason only when
// there is no message.
func TestAttributes(t *testing.T) {
	st := Status{Phase: Pending, Reason: WaitingForSlice, Message: "waiting for a free slice: …", Claim: "c", Node: "n", Device: "d"}
	got := st.Attributes()
	want := map[string]string{"phase": "Pending", "reason": "waiting for a free slice: …", "claim": "c", "node": "n", "device": "d"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("Attributes() = %v, want exactly %v", got, want)
	}
	if r := (Status{Phase: Running, Reason: Ready}).Attributes()["reason"]; r != "Ready" {
		t.Errorf("reason without a message = %q, want Ready", r)
	}
}
