package status

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/internal/view/viewtest"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Warning events only explain pods that are missing or unscheduled: the
// status of workloads whose pods all run on nodes (a no-change plan's)
// does not watch a namespace's events; one pod waiting for the scheduler
// does, and its warning is read.
func TestLoadReadsWarningsOnlyWhenPodsLack(t *testing.T) {
	w := &spec.Workload{Namespace: "team-a", Name: "ollama", Kind: spec.KindDeployment, Replicas: 1}
	one := int32(1)
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "ollama", Namespace: "team-a", Labels: map[string]string{contract.LabelManagedBy: contract.ManagedBy}},
		Spec:       appsv1.DeploymentSpec{Replicas: &one},
	}
	pod := func(node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ollama-abc", Namespace: "team-a", Labels: map[string]string{objects.LabelWorkload: "ollama"}},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	warning := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ollama-abc.1", Namespace: "team-a"}, Type: corev1.EventTypeWarning,
		Reason: "FailedResourceClaimCreation", Message: "exceeded quota", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "ollama-abc"}}
	for _, tc := range []struct {
		node  string
		reads bool
	}{{"gpu-node-1", false}, {"", true}} {
		v, client := viewtest.New(t, deployment, pod(tc.node), warning)
		s, err := Load(context.Background(), v, []*spec.Workload{w})
		if err != nil {
			t.Fatal(err)
		}
		read := false
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "events" {
				read = true
			}
		}
		if read != tc.reads || (len(s.events["team-a"]) > 0) != tc.reads {
			t.Errorf("pod on node %q: events read %v (%d), want %v", tc.node, read, len(s.events["team-a"]), tc.reads)
		}
	}
}
