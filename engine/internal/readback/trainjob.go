package readback

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// readTrainJob reads a distributed training job rendered as Kubeflow
// Trainer's TrainJob (render.trainJob): its workers are its runtime's
// nodes, its pod template the runtime's. ok is false when there is no
// TrainJob of gpuslice's with its runtime, including where the cluster
// does not serve them.
func readTrainJob(ctx context.Context, v *view.View, w *spec.Workload) (template corev1.PodTemplateSpec, ok bool, err error) {
	job, err := get[unstructured.Unstructured](ctx, v, "trainer.kubeflow.org", render.TrainJobKind, w.Namespace, w.Name)
	if err != nil {
		if notServed(err) {
			return template, false, nil
		}
		return template, false, err
	}
	if job == nil || !managed(job.GetLabels()) {
		return template, false, nil
	}
	name, _, _ := unstructured.NestedString(job.Object, "spec", "runtimeRef", "name")
	rt, err := get[unstructured.Unstructured](ctx, v, "trainer.kubeflow.org", render.TrainingRuntimeKind, w.Namespace, name)
	if err != nil {
		if notServed(err) {
			return template, false, nil
		}
		return template, false, err
	}
	if rt == nil || !managed(rt.GetLabels()) {
		return template, false, nil
	}
	nodes, _, _ := unstructured.NestedInt64(rt.Object, "spec", "mlPolicy", "numNodes")
	jobs, _, _ := unstructured.NestedSlice(rt.Object, "spec", "template", "spec", "replicatedJobs")
	for _, j := range jobs {
		m, _ := j.(map[string]any)
		if m["name"] != render.TrainerNode {
			continue
		}
		pod, found, err := unstructured.NestedMap(m, "template", "spec", "template")
		if err != nil || !found {
			return template, false, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pod, &template); err != nil {
			return template, false, err
		}
		w.Kind, w.Replicas, w.Workers = spec.KindJob, 1, int32(nodes)
		w.TrainingOperator = spec.TrainingOperatorTrainJob
		return template, true, nil
	}
	return template, false, nil
}
