package checks

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/render"
)

// slicesOf is how many slices a workload pod's claim holds: gpus_per_pod,
// which the engine records on the pod template when it is more than 1.
func slicesOf(pod *corev1.Pod) int64 {
	if n, err := strconv.ParseInt(pod.Annotations[render.AnnotationGPUsPerPod], 10, 64); err == nil && n > 0 {
		return n
	}
	return 1
}
