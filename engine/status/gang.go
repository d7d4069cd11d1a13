package status

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// waitingForSlices is the message of a pod the scheduler cannot give its
// slices: for several per pod, they must all be free on one node.
func waitingForSlices(w *spec.Workload, pod, asked string) string {
	if asked != "" {
		return fmt.Sprintf("waiting for a free slice: no GPU has %s free for a %s slice; pod %s stays Pending until one frees (quota is an entitlement, not a reservation)", asked, w.Package, pod)
	}
	if n := w.DevicesPerPod(); n > 1 {
		return fmt.Sprintf("waiting for free slices: pod %s needs %d free %s slices on one node and no node has them; it stays Pending until they free (quota is an entitlement, not a reservation)", pod, n, w.Package)
	}
	return fmt.Sprintf("waiting for a free slice: no %s slice is free on any node; pod %s stays Pending until one frees (quota is an entitlement, not a reservation)", w.Package, pod)
}

// devices lists a claim's allocated devices, comma-separated: a pod of
// gpus_per_pod = N has N.
func devices(results []resourcev1.DeviceRequestAllocationResult) string {
	names := make([]string, len(results))
	for i, r := range results {
		names[i] = r.Device
	}
	return strings.Join(names, ",")
}

// gang names a distributed training job that is only partly scheduled —
// the classic deadlock, where the workers that have slices hold them while
// the rest wait — and what holds each waiting worker.
func (s *Snapshot) gang(w *spec.Workload, pods []corev1.Pod, st *Status) {
	if !w.Distributed() || st.Scheduled == 0 || st.Scheduled >= w.Workers {
		return
	}
	type waiting struct {
		index int
		why   string
	}
	var held []waiting
	seen := map[int]bool{}
	for i := range pods {
		pod := &pods[i]
		index, ok := workerRank(pod)
		if !ok {
			continue
		}
		seen[index] = true
		if pod.Spec.NodeName == "" {
			_, why := s.diagnosePod(w, pod)
			held = append(held, waiting{index, why})
		}
	}
	for i := 0; i < int(w.Workers); i++ {
		if !seen[i] {
			held = append(held, waiting{i, "its pod is not created yet"})
		}
	}
	if len(held) == 0 {
		return
	}
	sort.Slice(held, func(i, j int) bool { return held[i].index < held[j].index })
	var parts []string
	for _, h := range held {
		parts = append(parts, fmt.Sprintf("worker %d waits: %s", h.index, h.why))
	}
	st.Message = fmt.Sprintf("%d of %d workers have slices and hold them while the gang is incomplete; %s", st.Scheduled, w.Workers, strings.Join(parts, "; "))
}
