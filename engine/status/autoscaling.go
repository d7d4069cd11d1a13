package status

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// wanted is the replica count the workload should run: the configuration's,
// or the controller's own when an autoscaler owns it.
func (s *Snapshot) wanted(w *spec.Workload) int32 {
	if !w.Autoscaled() {
		return w.Pods()
	}
	key := w.Namespace + "/" + w.Name
	switch w.Kind {
	case spec.KindDeployment:
		if d := s.deployments[key]; d != nil && d.Spec.Replicas != nil {
			return *d.Spec.Replicas
		}
	case spec.KindStatefulSet:
		if st := s.statefulSet[key]; st != nil && st.Spec.Replicas != nil {
			return *st.Spec.Replicas
		}
	}
	return w.InitialReplicas()
}

// waitingSummary prefixes the worst replica's reason with how many
// replicas wait for a slice, when some run and others wait: with
// several replicas (an autoscaler scaling past the quota or the free
// slices) the worst pod alone hides how much of the workload serves.
func (s *Snapshot) waitingSummary(w *spec.Workload, pods []corev1.Pod, want int32, missingPods int, worst Reason, msg string) string {
	if (worst != WaitingForSlice && worst != GPUQuotaExhausted) || want < 2 {
		return msg
	}
	waiting := 0
	for i := range pods {
		if r, _ := s.diagnosePod(w, &pods[i]); r == WaitingForSlice || r == GPUQuotaExhausted {
			waiting++
		}
	}
	if worst == GPUQuotaExhausted && missingPods > 0 {
		waiting += missingPods // refused by the quota before they had a pod
	}
	if waiting == 0 {
		return msg
	}
	prefix := fmt.Sprintf("%d of %d replicas wait for a slice", waiting, want)
	if as := w.Autoscaling; as != nil {
		prefix += fmt.Sprintf(" (the autoscaler asks for %d, max_replicas %d)", want, as.MaxReplicas)
	}
	return prefix + ": " + msg
}
