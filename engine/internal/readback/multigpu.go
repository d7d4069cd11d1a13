package readback

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// readWorkers recognises a distributed training job (render.training): an
// Indexed Job whose pods are in the workers' subdomain. Its completions are
// the workers; replicas stay 1.
func readWorkers(w *spec.Workload, j *batchv1.Job) {
	w.Workers = 1
	if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion ||
		j.Spec.Template.Spec.Subdomain != render.WorkersServiceName(w) {
		return
	}
	w.Workers, w.Replicas = deref(j.Spec.Completions, 1), 1
}

// readGPUsPerPod reads gpus_per_pod from the pod template's annotation
// (absent for one device) and leaves out the rendezvous environment the
// engine adds to a training job's container.
func readGPUsPerPod(w *spec.Workload, template corev1.PodTemplateSpec) {
	w.GPUsPerPod = 1
	if n, err := strconv.Atoi(template.Annotations[render.AnnotationGPUsPerPod]); err == nil && n > 0 {
		w.GPUsPerPod = int32(n)
	}
	if w.Workers == 0 {
		w.Workers = 1
	}
	if !w.Distributed() {
		return
	}
	for _, name := range spec.TrainingEnv {
		delete(w.Container.Env, name)
	}
	if len(w.Container.Env) == 0 {
		w.Container.Env = nil
	}
}
