package status

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// loadTrainJob reads a workload's TrainJob; nil when there is none,
// including where the cluster does not serve the kind.
func loadTrainJob(ctx context.Context, v *view.View, w *spec.Workload) (*unstructured.Unstructured, error) {
	j, err := get[unstructured.Unstructured](ctx, v, view.ManagedKind("trainer.kubeflow.org", "TrainJob"), w)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	return j, err
}

// trainJobOutcome is the phase a TrainJob's true Complete or Failed
// condition says, as Kubeflow Trainer writes them; ok is false while it
// runs.
func trainJobOutcome(j *unstructured.Unstructured, st *Status) (ok bool) {
	conds, _, _ := unstructured.NestedSlice(j.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] != string(corev1.ConditionTrue) {
			continue
		}
		msg, _ := m["message"].(string)
		switch m["type"] {
		case "Complete":
			st.Phase, st.Reason, st.Message = Succeeded, Completed, "the TrainJob completed"
			st.Ready = st.Replicas
			return true
		case "Failed":
			st.Phase, st.Reason, st.Message = Failed, JobFailed, fmt.Sprintf("the TrainJob failed: %s", msg)
			return true
		}
	}
	return false
}

// noTrainerPods is the status of a TrainJob with no pod at all: Kubeflow
// Trainer creates them (through a JobSet), so it may not be running.
func noTrainerPods(w *spec.Workload) (Reason, string) {
	return Progressing, fmt.Sprintf("TrainJob %s/%s has no pods yet: Kubeflow Trainer creates its %d nodes' pods through a JobSet; "+
		"if none appear, check that Trainer and JobSet run (kubectl get deployment -n kubeflow-system) and read the TrainJob's conditions and events (kubectl describe trainjob %s -n %s)",
		w.Namespace, w.Name, w.Workers, w.Name, w.Namespace)
}
