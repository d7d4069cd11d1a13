package readback

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// readPyTorchJob reads a distributed training job rendered as Kubeflow's
// PyTorchJob (render.pyTorchJob): its workers are the Master and the
// Workers, its pod template the Master's, without the container port the
// engine adds for the operator. ok is false when there is none of
// gpuslice's, including where the cluster does not serve PyTorchJob.
func readPyTorchJob(ctx context.Context, v *view.View, w *spec.Workload) (template corev1.PodTemplateSpec, ok bool, err error) {
	u, err := get[unstructured.Unstructured](ctx, v, "kubeflow.org", render.PyTorchJobKind, w.Namespace, w.Name)
	if err != nil {
		if notServed(err) {
			return template, false, nil
		}
		return template, false, err
	}
	if u == nil || !managed(u.GetLabels()) {
		return template, false, nil
	}
	replicas := func(typ string) int32 {
		n, _, _ := unstructured.NestedInt64(u.Object, "spec", "pytorchReplicaSpecs", typ, "replicas")
		return int32(n)
	}
	m, found, err := unstructured.NestedMap(u.Object, "spec", "pytorchReplicaSpecs", render.PyTorchMaster, "template")
	if err != nil || !found {
		return template, false, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &template); err != nil {
		return template, false, err
	}
	if len(template.Spec.Containers) > 0 {
		c := &template.Spec.Containers[0]
		var ports []corev1.ContainerPort
		for _, p := range c.Ports {
			if p.Name != render.PyTorchPortName {
				ports = append(ports, p)
			}
		}
		c.Ports = ports
	}
	w.Kind, w.Replicas, w.Workers = spec.KindJob, 1, replicas(render.PyTorchMaster)+replicas(render.PyTorchWorker)
	w.TrainingOperator = spec.TrainingOperatorPyTorchJob
	return template, true, nil
}

// notServed reports whether err says the API server does not serve the
// kind (its CRD is not installed).
func notServed(err error) bool {
	return apierrors.IsNotFound(err) || meta.IsNoMatchError(err)
}
