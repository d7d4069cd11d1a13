package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Kubeflow Trainer's TrainJob and TrainingRuntime (trainer.kubeflow.org,
// which replaces the Training Operator's kubeflow.org/v1 jobs): no
// client-go types, written as the unstructured objects its CRDs document.
const (
	TrainerAPIVersion   = "trainer.kubeflow.org/v1alpha1"
	TrainJobKind        = "TrainJob"
	TrainingRuntimeKind = "TrainingRuntime"
	// TrainerNode names the runtime's replicated job and its container:
	// Trainer's torch plugin gives the container named so, in the job
	// labelled as the trainer step, the rendezvous environment and port.
	TrainerNode = "node"
	// LabelTrainerAncestor marks the runtime's job that runs the trainer.
	LabelTrainerAncestor = "trainer.kubeflow.org/trainjob-ancestor-step"
	// AnnotationRuntimeDigest, in the TrainJob's spec, identifies the
	// runtime it was made from (see objects' TrainJob).
	AnnotationRuntimeDigest = "gpuslice.dev/runtime-digest"
)

// trainJob renders a distributed training job for Kubeflow Trainer: a
// TrainingRuntime of its own, whose one replicated job runs the pod
// template on workers nodes with gpus_per_pod processes each (torch
// policy), and the TrainJob that runs it. A TrainJob cannot add claims
// to a pod (its overrides have no resourceClaims), so the runtime carries
// the claim template; the ClusterTrainingRuntimes Trainer installs are left
// alone. Trainer creates the JobSet, the pods, the Service that makes node
// 0 reachable and the PET_* environment, so gpuslice sets none of them.
func (r renderer) trainJob(w *spec.Workload, template corev1.PodTemplateSpec) ([]objects.Object, error) {
	template.Spec.Containers[0].Name = TrainerNode
	// OnFailure for the reason training() gives: a node restarts in place
	// and keeps the slices its claim holds.
	template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	pod, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&template)
	if err != nil {
		return nil, fmt.Errorf("render TrainingRuntime %s: %w", w.Address, err)
	}
	objects.Prune(pod)
	labels := map[string]string{"app.kubernetes.io/name": w.Name, objects.LabelWorkload: w.Name}
	runtimeSpec := map[string]any{
		"mlPolicy": map[string]any{
			"numNodes": int64(w.Workers),
			"torch":    map[string]any{"numProcPerNode": int64(w.DevicesPerPod())},
		},
		"template": map[string]any{"spec": map[string]any{
			"replicatedJobs": []any{map[string]any{
				"name":     TrainerNode,
				"replicas": int64(1),
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{LabelTrainerAncestor: "trainer"}},
					// The indexed Job's backoff: three rounds of failures per node.
					"spec": map[string]any{"backoffLimit": int64(3 * w.Workers), "template": pod},
				},
			}},
		}},
	}
	digest, err := json.Marshal(runtimeSpec) // map keys come out sorted
	if err != nil {
		return nil, fmt.Errorf("render TrainingRuntime %s: %w", w.Address, err)
	}
	sum := sha256.Sum256(digest)
	rt := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": TrainerAPIVersion, "kind": TrainingRuntimeKind,
		"metadata": unstructuredMeta(r.meta(w.Address, w.Namespace, w.Name, labels)),
		"spec":     runtimeSpec,
	}}
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": TrainerAPIVersion, "kind": TrainJobKind,
		"metadata": unstructuredMeta(r.meta(w.Address, w.Namespace, w.Name, labels)),
		"spec": map[string]any{
			"runtimeRef":  map[string]any{"apiGroup": "trainer.kubeflow.org", "kind": TrainingRuntimeKind, "name": w.Name},
			"annotations": map[string]any{AnnotationRuntimeDigest: hex.EncodeToString(sum[:8])},
		},
	}}
	return []objects.Object{objects.FromUnstructured(w.Address, rt), objects.FromUnstructured(w.Address, job)}, nil
}
