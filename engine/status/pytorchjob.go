package status

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// Labels the Kubeflow Training Operator puts on the pods of a PyTorchJob:
// its name, and each pod's replica type (master or worker) and index.
const (
	LabelTrainingJobName      = "training.kubeflow.org/job-name"
	LabelTrainingReplicaType  = "training.kubeflow.org/replica-type"
	LabelTrainingReplicaIndex = "training.kubeflow.org/replica-index"
)

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
