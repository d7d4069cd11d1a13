package status

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// diagnosePod names why one replica is not running, with what to do: the
// container's own failures first, then its claim, then scheduling.
func (s *Snapshot) diagnosePod(w *spec.Workload, pod *corev1.Pod) (Reason, string) {
	for _, c := range pod.Status.ContainerStatuses {
		if t := c.LastTerminationState.Terminated; t != nil && (t.Reason == "OOMKilled" || t.ExitCode == 137) {
			limit := w.Container.MemoryLimit
			if limit == "" {
				limit = "none set"
			}
			return OOMKilled, fmt.Sprintf("pod %s: container was OOMKilled (exit 137) by its RAM limit (container.memory_limit: %s) — the container's memory, not the GPU slice; raise memory_limit (and memory_request): 2Gi request / 4Gi limit is known to work for Ollama", pod.Name, limit)
		}
		if wt := c.State.Waiting; wt != nil {
			switch wt.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
				return ImagePullError, fmt.Sprintf("pod %s: cannot pull image %s (%s: %s): check the image name and tag, and that the node can reach its registry", pod.Name, c.Image, wt.Reason, wt.Message)
			case "CrashLoopBackOff":
				msg := fmt.Sprintf("pod %s: container keeps crashing (%d restarts)", pod.Name, c.RestartCount)
				if t := c.LastTerminationState.Terminated; t != nil {
					msg += fmt.Sprintf("; last exit code %d (%s) %s", t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
				}
				return CrashLoop, msg + ": read its logs with kubectl logs --previous"
			}
		}
	}
	if failure := s.eventMessage(pod.Namespace, "Pod", pod.Name, "FailedResourceClaimCreation"); failure != "" && pod.Spec.NodeName == "" {
		if r, msg := quotaReason(failure, w); r == GPUQuotaExhausted {
			return r, fmt.Sprintf("pod %s: %s", pod.Name, msg)
		}
		return Progressing, fmt.Sprintf("pod %s: its claim could not be created: %s", pod.Name, failure)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
			continue
		}
		if strings.Contains(c.Message, "cannot allocate all claims") {
			asked, _ := s.capacityAsked(pod)
			if profile := s.migProfileOf(pod); profile != "" {
				return WaitingForSlice, fmt.Sprintf("waiting for a free MIG instance: no node has a free %s instance for a %s slice; pod %s stays Pending until one frees (quota is an entitlement, not a reservation)", profile, w.Package, pod.Name)
			}
			return WaitingForSlice, waitingForSlices(w, pod.Name, asked)
		}
		msg := fmt.Sprintf("pod %s cannot be scheduled: %s", pod.Name, c.Message)
		if strings.Contains(c.Message, "unbound immediate PersistentVolumeClaims") {
			msg += "; the model volume is not bound: the cluster needs a StorageClass that provisions it (set model_volume.storage_class) or a matching PersistentVolume"
		}
		return Unschedulable, msg
	}
	if pod.Spec.NodeName != "" {
		ready := false
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if ready {
			return Ready, ""
		}
		if pod.Status.Phase == corev1.PodPending && len(pod.Status.ContainerStatuses) == 0 {
			return Scheduled, fmt.Sprintf("pod %s has its slice on node %s and waits for the node to start it", pod.Name, pod.Spec.NodeName)
		}
		return Progressing, fmt.Sprintf("pod %s is %s and not ready yet", pod.Name, pod.Status.Phase)
	}
	return Progressing, fmt.Sprintf("pod %s is waiting for the scheduler", pod.Name)
}

// quotaReason tells GPU quota from pooled CPU/memory quota in a
// "forbidden: exceeded quota" message.
func quotaReason(msg string, w *spec.Workload) (Reason, string) {
	if !strings.Contains(msg, "exceeded quota") {
		return Progressing, "pods cannot be created: " + msg
	}
	if strings.Contains(msg, ".deviceclass.resource.k8s.io/devices") {
		return GPUQuotaExhausted, fmt.Sprintf("GPU quota exhausted: namespace %s already holds every %s slice its gpuslice_quota grants; the replica waits until one is released, or raise slices[%q] (%s)", w.Namespace, w.Package, w.Package, msg)
	}
	return CPUQuotaExhausted, fmt.Sprintf("CPU/memory quota exhausted: namespace %s has no pooled CPU or memory left for this pod (a GPU pod still needs both); free some, lower container cpu_request/memory_request, or raise cpu_requests/memory_requests in its gpuslice_quota (%s)", w.Namespace, msg)
}
