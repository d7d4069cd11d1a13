// Package status diagnoses a workload from what the cluster says about it —
// its controller, pods, claims and events — and names the reason it is not
// running with what to do: waiting for a free slice, GPU quota or pooled
// CPU/memory quota exhausted, OOMKilled (the container's RAM, not the
// slice), image pull errors, crash loops. Apply's wait, `gpuslice status`
// and the provider all use it.
package status

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Phase is the workload's overall state.
type Phase string

const (
	Running   Phase = "Running"
	Pending   Phase = "Pending"
	Succeeded Phase = "Succeeded"
	Failed    Phase = "Failed"
	Missing   Phase = "Missing"
)

// Reason says why, in one word a program can test.
type Reason string

const (
	Ready             Reason = "Ready"
	Completed         Reason = "Completed"
	Scheduled         Reason = "Scheduled"
	WaitingForSlice   Reason = "WaitingForSlice"
	GPUQuotaExhausted Reason = "GPUQuotaExhausted"
	CPUQuotaExhausted Reason = "CPUMemoryQuotaExhausted"
	Unschedulable     Reason = "Unschedulable"
	OOMKilled         Reason = "OOMKilled"
	ImagePullError    Reason = "ImagePullError"
	CrashLoop         Reason = "CrashLoop"
	JobFailed         Reason = "JobFailed"
	Progressing       Reason = "Progressing"
	NotApplied        Reason = "NotApplied"
)

// severity orders pod reasons: the workload reports its worst replica.
var severity = map[Reason]int{
	OOMKilled: 9, CrashLoop: 8, ImagePullError: 7, GPUQuotaExhausted: 6, CPUQuotaExhausted: 6,
	Unschedulable: 5, WaitingForSlice: 4, Progressing: 3, Scheduled: 2, Ready: 1,
}

// Fatal reports whether waiting longer will not help without a change.
func (r Reason) Fatal() bool {
	return r == OOMKilled || r == ImagePullError || r == CrashLoop || r == JobFailed
}

// Status is a workload's diagnosed state.
type Status struct {
	Phase   Phase  `json:"phase"`
	Reason  Reason `json:"reason"`
	Message string `json:"message"`
	// Replicas wanted, with their slice and node (Scheduled), and Ready.
	Replicas  int32 `json:"replicas"`
	Scheduled int32 `json:"scheduled"`
	Ready     int32 `json:"ready"`
	// First replica's claim, node and allocated device.
	Claim  string `json:"claim,omitempty"`
	Node   string `json:"node,omitempty"`
	Device string `json:"device,omitempty"`
}

// Attributes are the computed workload attributes that only the cluster
// can tell, by name: what the provider records in the state and the CLI's
// outputs see after apply. reason is the message, not the one-word Reason:
// the attribute is documented as why the workload is not running with what
// to do, which is what the message says ("waiting for a free slice: …");
// the Reason stands in only when there is no message.
func (s Status) Attributes() map[string]string {
	reason := s.Message
	if reason == "" {
		reason = string(s.Reason)
	}
	return map[string]string{"phase": string(s.Phase), "reason": reason, "claim": s.Claim, "node": s.Node, "device": s.Device}
}

// Snapshot is what the cluster says about the workloads of some
// namespaces, read with a few lists per namespace.
type Snapshot struct {
	pods        map[string][]corev1.Pod // by namespace
	claims      map[string]map[string]*resourcev1.ResourceClaim
	events      map[string][]corev1.Event
	deployments map[string]*appsv1.Deployment // by namespace/name
	statefulSet map[string]*appsv1.StatefulSet
	jobs        map[string]*batchv1.Job
}

// Load reads the workloads' pods, claims, events and controllers in each
// namespace.
func Load(ctx context.Context, client kubernetes.Interface, namespaces []string) (*Snapshot, error) {
	s := &Snapshot{
		pods: map[string][]corev1.Pod{}, claims: map[string]map[string]*resourcev1.ResourceClaim{}, events: map[string][]corev1.Event{},
		deployments: map[string]*appsv1.Deployment{}, statefulSet: map[string]*appsv1.StatefulSet{}, jobs: map[string]*batchv1.Job{},
	}
	workloadPods := metav1.ListOptions{LabelSelector: objects.LabelWorkload}
	for _, ns := range dedupe(namespaces) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, workloadPods)
		if err != nil {
			return nil, fmt.Errorf("list pods in %s: %w", ns, err)
		}
		s.pods[ns] = pods.Items
		claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list resource claims in %s: %w", ns, err)
		}
		s.claims[ns] = map[string]*resourcev1.ResourceClaim{}
		for i := range claims.Items {
			s.claims[ns][claims.Items[i].Name] = &claims.Items[i]
		}
		events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list events in %s: %w", ns, err)
		}
		s.events[ns] = events.Items
		deps, err := client.AppsV1().Deployments(ns).List(ctx, workloadPods)
		if err != nil {
			return nil, fmt.Errorf("list deployments in %s: %w", ns, err)
		}
		for i := range deps.Items {
			s.deployments[ns+"/"+deps.Items[i].Name] = &deps.Items[i]
		}
		sts, err := client.AppsV1().StatefulSets(ns).List(ctx, workloadPods)
		if err != nil {
			return nil, fmt.Errorf("list statefulsets in %s: %w", ns, err)
		}
		for i := range sts.Items {
			s.statefulSet[ns+"/"+sts.Items[i].Name] = &sts.Items[i]
		}
		jobs, err := client.BatchV1().Jobs(ns).List(ctx, workloadPods)
		if err != nil {
			return nil, fmt.Errorf("list jobs in %s: %w", ns, err)
		}
		for i := range jobs.Items {
			s.jobs[ns+"/"+jobs.Items[i].Name] = &jobs.Items[i]
		}
	}
	return s, nil
}

// Diagnose returns the workload's status from the snapshot, which must
// cover its namespace.
func (s *Snapshot) Diagnose(w *spec.Workload) Status {
	key := w.Namespace + "/" + w.Name
	st := Status{Replicas: w.Replicas}
	var controllerFailure string
	var controllerName string
	switch w.Kind {
	case spec.KindDeployment:
		d, ok := s.deployments[key]
		if !ok {
			return missing(w)
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
				controllerFailure = c.Message
			}
		}
		controllerName = w.Name
	case spec.KindStatefulSet:
		if _, ok := s.statefulSet[key]; !ok {
			return missing(w)
		}
		controllerName = w.Name
	case spec.KindJob:
		j, ok := s.jobs[key]
		if !ok {
			return missing(w)
		}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				st.Phase, st.Reason, st.Message = Succeeded, Completed, "the job completed"
				st.Ready = j.Status.Succeeded
				return st
			case batchv1.JobFailed:
				st.Phase, st.Reason, st.Message = Failed, JobFailed, fmt.Sprintf("the job failed: %s", c.Message)
				return st
			}
		}
		controllerName = w.Name
	}
	if controllerFailure == "" {
		controllerFailure = s.createFailure(w.Namespace, controllerName)
	}

	pods := s.podsOf(w)
	worst := Reason("")
	var worstMsg string
	for i, pod := range pods {
		r, msg := s.diagnosePod(w, &pod)
		if i == 0 {
			st.Claim, st.Device = s.claimOf(&pod)
			st.Node = pod.Spec.NodeName
		}
		if pod.Spec.NodeName != "" {
			st.Scheduled++
		}
		if r == Ready {
			st.Ready++
		}
		if severity[r] > severity[worst] {
			worst, worstMsg = r, msg
		}
	}
	missingPods := int(w.Replicas) - len(pods)
	switch {
	case controllerFailure != "" && (missingPods > 0 || len(pods) == 0):
		worst, worstMsg = quotaReason(controllerFailure, w)
	case missingPods > 0 && severity[worst] < severity[Progressing]:
		worst, worstMsg = Progressing, fmt.Sprintf("%d of %d replicas have no pod yet", missingPods, w.Replicas)
	}
	switch {
	case w.Replicas == 0:
		st.Phase, st.Reason, st.Message = Running, Ready, "scaled to zero replicas"
	case st.Ready >= w.Replicas:
		st.Phase, st.Reason, st.Message = Running, Ready, fmt.Sprintf("%d/%d replicas ready", st.Ready, w.Replicas)
	default:
		st.Phase, st.Reason, st.Message = Pending, worst, worstMsg
		if worst.Fatal() {
			st.Phase = Failed
		}
	}
	return st
}

func missing(w *spec.Workload) Status {
	return Status{Phase: Missing, Reason: NotApplied, Replicas: w.Replicas,
		Message: fmt.Sprintf("%s %s/%s does not exist: run apply", w.Kind, w.Namespace, w.Name)}
}

func (s *Snapshot) podsOf(w *spec.Workload) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range s.pods[w.Namespace] {
		if p.Labels[objects.LabelWorkload] == w.Name && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// claimOf returns the pod's generated claim and its allocated device.
func (s *Snapshot) claimOf(pod *corev1.Pod) (string, string) {
	for _, cs := range pod.Status.ResourceClaimStatuses {
		if cs.ResourceClaimName == nil {
			continue
		}
		name := *cs.ResourceClaimName
		c := s.claims[pod.Namespace][name]
		if c != nil && c.Status.Allocation != nil && len(c.Status.Allocation.Devices.Results) > 0 {
			return name, c.Status.Allocation.Devices.Results[0].Device
		}
		return name, ""
	}
	return "", ""
}

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
			return WaitingForSlice, fmt.Sprintf("waiting for a free slice: no %s slice is free on any node; pod %s stays Pending until one frees (quota is an entitlement, not a reservation)", w.Package, pod.Name)
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

// createFailure returns the latest "FailedCreate" event of a controller.
func (s *Snapshot) createFailure(ns, name string) string {
	for _, kind := range []string{"ReplicaSet", "StatefulSet", "Job"} {
		if msg := s.eventMessage(ns, kind, name, "FailedCreate"); msg != "" {
			return msg
		}
	}
	return ""
}

// eventMessage returns the newest event of a reason about an object. A
// ReplicaSet name has a hash suffix: it matches by prefix.
func (s *Snapshot) eventMessage(ns, kind, name, reason string) string {
	var newest *corev1.Event
	for i := range s.events[ns] {
		e := &s.events[ns][i]
		if e.Reason != reason || e.InvolvedObject.Kind != kind {
			continue
		}
		if e.InvolvedObject.Name != name && !(kind == "ReplicaSet" && strings.HasPrefix(e.InvolvedObject.Name, name+"-")) {
			continue
		}
		if newest == nil || eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	if newest == nil {
		return ""
	}
	return newest.Message
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}
