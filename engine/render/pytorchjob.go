package render

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Kubeflow Training Operator's PyTorchJob, which is no client-go type:
// written as the unstructured object its CRD documents.
const (
	PyTorchJobAPIVersion = "kubeflow.org/v1"
	PyTorchJobKind       = "PyTorchJob"
	// PyTorchContainerName is the container name the operator requires in
	// every replica (its validation refuses a PyTorchJob without one) and
	// the one it gives the rendezvous environment and port.
	PyTorchContainerName = "pytorch"
	// PyTorchPortName is the container port the operator takes MASTER_PORT
	// from; without it, its defaulting adds 23456.
	PyTorchPortName = "pytorchjob-port"
	// PyTorch replica types: rank 0 is the Master, ranks 1… the Workers.
	PyTorchMaster = "Master"
	PyTorchWorker = "Worker"
)

// pyTorchJob renders a distributed training job as Kubeflow's PyTorchJob:
// one Master and workers−1 Workers from the same pod template. The
// operator creates the pods and the Service that makes the Master
// reachable, and sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and the
// PET_* variables itself, so gpuslice sets none of them; nprocPerNode is
// gpus_per_pod, as PET_NPROC_PER_NODE is on the indexed Job.
func (r renderer) pyTorchJob(w *spec.Workload, template corev1.PodTemplateSpec) (objects.Object, error) {
	c := &template.Spec.Containers[0]
	c.Name = PyTorchContainerName
	// torchrun's default port, as on the indexed Job, not the operator's.
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: PyTorchPortName, ContainerPort: spec.DefaultMasterPort, Protocol: corev1.ProtocolTCP})
	// OnFailure for the reason training() gives: a worker restarts in place
	// and keeps the slices its claim holds.
	template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	pod, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&template)
	if err != nil {
		return objects.Object{}, fmt.Errorf("render PyTorchJob %s: %w", w.Address, err)
	}
	objects.Prune(pod)
	replica := func(n int32) map[string]any {
		return map[string]any{"replicas": int64(n), "restartPolicy": string(corev1.RestartPolicyOnFailure),
			"template": runtime.DeepCopyJSON(pod)}
	}
	meta := r.meta(w.Address, w.Namespace, w.Name, map[string]string{"app.kubernetes.io/name": w.Name, objects.LabelWorkload: w.Name})
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": PyTorchJobAPIVersion, "kind": PyTorchJobKind, "metadata": unstructuredMeta(meta),
		"spec": map[string]any{
			// The indexed Job's backoff: three rounds of failures per worker.
			// Finished pods stay, as the indexed Job's do, for their logs;
			// None is also the operator's default, written here so that what
			// its defaulting adds is what gpuslice applied.
			"runPolicy":    map[string]any{"backoffLimit": int64(3 * w.Workers), "cleanPodPolicy": "None"},
			"nprocPerNode": strconv.Itoa(w.DevicesPerPod()),
			"pytorchReplicaSpecs": map[string]any{
				PyTorchMaster: replica(1),
				PyTorchWorker: replica(w.Workers - 1),
			},
		},
	}}
	return objects.FromUnstructured(w.Address, u), nil
}

// unstructuredMeta is the metadata of an object rendered unstructured (a
// kind client-go has no type for): name, namespace, labels, annotations.
func unstructuredMeta(meta metav1.ObjectMeta) map[string]any {
	labels, annotations := map[string]any{}, map[string]any{}
	for k, v := range meta.Labels {
		labels[k] = v
	}
	for k, v := range meta.Annotations {
		annotations[k] = v
	}
	return map[string]any{"name": meta.Name, "namespace": meta.Namespace, "labels": labels, "annotations": annotations}
}
