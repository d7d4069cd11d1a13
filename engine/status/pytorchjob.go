package status

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Labels the Kubeflow Training Operator puts on the pods of a PyTorchJob:
// its name, and each pod's replica type (master or worker) and index.
const (
	LabelTrainingJobName      = "training.kubeflow.org/job-name"
	LabelTrainingReplicaType  = "training.kubeflow.org/replica-type"
	LabelTrainingReplicaIndex = "training.kubeflow.org/replica-index"
)

// loadPyTorchJob reads a workload's PyTorchJob; nil when there is none,
// including where the cluster does not serve the kind.
func loadPyTorchJob(ctx context.Context, v *view.View, w *spec.Workload) (*unstructured.Unstructured, error) {
	j, err := get[unstructured.Unstructured](ctx, v, view.ManagedKind("kubeflow.org", "PyTorchJob"), w)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	return j, err
}

// pyTorchJobOutcome is the phase a PyTorchJob's true Succeeded or Failed
// condition says, as the operator writes them; ok is false while it runs.
func pyTorchJobOutcome(j *unstructured.Unstructured, st *Status) (ok bool) {
	conds, _, _ := unstructured.NestedSlice(j.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] != string(corev1.ConditionTrue) {
			continue
		}
		msg, _ := m["message"].(string)
		switch m["type"] {
		case "Succeeded":
			st.Phase, st.Reason, st.Message = Succeeded, Completed, "the PyTorchJob succeeded"
			st.Ready = st.Replicas
			return true
		case "Failed":
			st.Phase, st.Reason, st.Message = Failed, JobFailed, fmt.Sprintf("the PyTorchJob failed: %s", msg)
			return true
		}
	}
	return false
}

// noOperatorPods is the status of a PyTorchJob with no pod at all: the
// Kubeflow Training Operator creates them, so it may not be running.
func noOperatorPods(w *spec.Workload) (Reason, string) {
	return Progressing, fmt.Sprintf("PyTorchJob %s/%s has no pods yet: the Kubeflow Training Operator creates its %d workers' pods; "+
		"if none appear, check that the operator runs (kubectl get deployment -A -l control-plane=kubeflow-training-operator) and read its logs and the PyTorchJob's events (kubectl describe pytorchjob %s -n %s)",
		w.Namespace, w.Name, w.Workers, w.Name, w.Namespace)
}

// workerRank is a training pod's rank: an indexed Job's completion index,
// or a PyTorchJob's Master 0 and Worker i+1; false when the pod has none.
func workerRank(pod *corev1.Pod) (int, bool) {
	if i, err := strconv.Atoi(pod.Annotations[batchv1.JobCompletionIndexAnnotation]); err == nil {
		return i, true
	}
	i, err := strconv.Atoi(pod.Labels[LabelTrainingReplicaIndex])
	if err != nil {
		return 0, false
	}
	if strings.EqualFold(pod.Labels[LabelTrainingReplicaType], "worker") {
		i++
	}
	return i, true
}
