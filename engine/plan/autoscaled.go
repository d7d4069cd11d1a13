package plan

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// replicasPath is where a Deployment or StatefulSet keeps its count.
const replicasPath = ".spec.replicas"

// Autoscaled reports whether an autoscaler owns the object's replica count
// (the render marks the workload controller).
func Autoscaled(o *unstructured.Unstructured) bool {
	return o != nil && o.GetAnnotations()[objects.AnnotationAutoscaledBy] != ""
}

// leaveReplicas returns what to apply to a controller that exists: without
// spec.replicas when an autoscaler owns it, so neither the plan shows the
// autoscaler's count as drift nor apply resets it. Only a controller being
// created gets the configured initial count.
func leaveReplicas(desired *unstructured.Unstructured) *unstructured.Unstructured {
	if !Autoscaled(desired) {
		return desired
	}
	d := desired.DeepCopy()
	unstructured.RemoveNestedField(d.Object, "spec", "replicas")
	return d
}

// withoutReplicas drops spec.replicas from an autoscaled controller's
// changes: gpuslice giving the field up to the autoscaler (apply hands it
// over first) is no change of the count.
func withoutReplicas(desired *unstructured.Unstructured, fields []FieldChange) []FieldChange {
	if !Autoscaled(desired) {
		return fields
	}
	out := fields[:0]
	for _, f := range fields {
		if f.Path != replicasPath {
			out = append(out, f)
		}
	}
	return out
}
