// Package status diagnoses a workload from what the cluster says about it —
// its controller, pods, claims and events — and names the reason it is not
// running with what to do: waiting for a free slice, GPU quota or pooled
// CPU/memory quota exhausted, OOMKilled (the container's RAM, not the
// slice), image pull errors, crash loops. Apply's wait, `gpuslice status`
// and the provider all use it.
package status

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

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
	// UnhealthyDevices are the slices of its pods that the kubelet reports
	// unhealthy, with why: the workload may fail on them.
	UnhealthyDevices []DeviceHealth `json:"unhealthy_devices,omitempty"`
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

// Diagnose returns the workload's status from the snapshot, which must
// cover its namespace.
func (s *Snapshot) Diagnose(w *spec.Workload) Status {
	want := s.wanted(w)
	st := Status{Replicas: want}
	controllerFailure, found, finished := s.controller(w, &st)
	if !found {
		return missing(w)
	}
	if finished {
		return st
	}
	pods := s.podsOf(w)
	st.UnhealthyDevices = unhealthyDevices(pods)
	worst, worstMsg := s.tallyPods(w, pods, &st)
	missingPods := int(want) - len(pods)
	switch {
	case controllerFailure != "" && (missingPods > 0 || len(pods) == 0):
		worst, worstMsg = quotaReason(controllerFailure, w)
	case len(pods) == 0 && w.PyTorchJob():
		worst, worstMsg = noOperatorPods(w)
	case len(pods) == 0 && w.TrainJob():
		worst, worstMsg = noTrainerPods(w)
	case missingPods > 0 && severity[worst] < severity[Progressing]:
		worst, worstMsg = Progressing, fmt.Sprintf("%d of %d replicas have no pod yet", missingPods, want)
	}
	worstMsg = s.waitingSummary(w, pods, want, missingPods, worst, worstMsg)
	s.conclude(w, pods, want, worst, worstMsg, &st)
	return st
}

// controller reads the workload's controller: whether it exists, whether
// it finished (a Job that completed or failed; st then says how), and the
// failure it or its creation reports.
func (s *Snapshot) controller(w *spec.Workload, st *Status) (failure string, found, finished bool) {
	key := w.Namespace + "/" + w.Name
	var name string
	switch w.Kind {
	case spec.KindDeployment:
		d, ok := s.deployments[key]
		if !ok {
			return "", false, false
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
				failure = c.Message
			}
		}
		name = w.Name
	case spec.KindStatefulSet:
		if _, ok := s.statefulSet[key]; !ok {
			return "", false, false
		}
		name = w.Name
	case spec.KindJob:
		if w.ByOperator() {
			j, ok := s.operatorJobs[key]
			if !ok {
				return "", false, false
			}
			if operatorJobOf(w).outcome(j, st) {
				return "", true, true
			}
			name = w.Name
			break
		}
		j, ok := s.jobs[key]
		if !ok {
			return "", false, false
		}
		if jobFinished(j, st) {
			return "", true, true
		}
		name = w.Name
	}
	if failure == "" {
		failure = s.createFailure(w.Namespace, name)
	}
	return failure, true, false
}

// jobFinished says whether the Job completed or failed, and then how in st.
func jobFinished(j *batchv1.Job, st *Status) bool {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			st.Phase, st.Reason, st.Message = Succeeded, Completed, "the job completed"
			st.Ready = j.Status.Succeeded
			return true
		case batchv1.JobFailed:
			st.Phase, st.Reason, st.Message = Failed, JobFailed, fmt.Sprintf("the job failed: %s", c.Message)
			return true
		}
	}
	return false
}

// tallyPods counts the workload's pods scheduled and ready into st, with
// the first one's claim, device and node, and returns the worst reason a
// pod gives, with its message.
func (s *Snapshot) tallyPods(w *spec.Workload, pods []corev1.Pod, st *Status) (Reason, string) {
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
	return worst, worstMsg
}

// conclude sets st's phase, reason and message: running once every wanted
// replica is ready, else pending (or failed) for the worst reason.
func (s *Snapshot) conclude(w *spec.Workload, pods []corev1.Pod, want int32, worst Reason, worstMsg string, st *Status) {
	switch {
	case want == 0:
		st.Phase, st.Reason, st.Message = Running, Ready, "scaled to zero replicas"
	case st.Ready >= want:
		st.Phase, st.Reason, st.Message = Running, Ready, fmt.Sprintf("%d/%d replicas ready", st.Ready, want)
		if _, timeSliced := s.capacityAsked(firstOf(pods)); timeSliced {
			st.Message += " on time-sliced GPUs: not isolated (no memory limit, no compute share; neighbours on the GPU can take its memory and time)"
		}
		if profile := s.migProfileOf(firstOf(pods)); profile != "" {
			st.Message += fmt.Sprintf(" on MIG %s instances: memory and compute isolated by the GPU (hardware isolation)", profile)
		}
	default:
		st.Phase, st.Reason, st.Message = Pending, worst, worstMsg
		if worst.Fatal() {
			st.Phase = Failed
		}
		s.gang(w, pods, st)
	}
}

func firstOf(pods []corev1.Pod) *corev1.Pod {
	if len(pods) == 0 {
		return &corev1.Pod{}
	}
	return &pods[0]
}

func missing(w *spec.Workload) Status {
	return Status{Phase: Missing, Reason: NotApplied, Replicas: w.Pods(),
		Message: fmt.Sprintf("%s %s/%s does not exist: run apply", controllerKind(w), w.Namespace, w.Name)}
}

// controllerKind names what a workload renders its pods' controller as.
func controllerKind(w *spec.Workload) string {
	if w.PyTorchJob() {
		return "PyTorchJob"
	}
	if w.TrainJob() {
		return "TrainJob"
	}
	return w.Kind
}
