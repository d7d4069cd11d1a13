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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Snapshot is what the cluster says about some workloads: their
// controllers, pods, the pods' claims and the warnings about them.
type Snapshot struct {
	pods        map[string][]corev1.Pod // by namespace
	claims      map[string]map[string]*resourcev1.ResourceClaim
	events      map[string][]corev1.Event
	deployments map[string]*appsv1.Deployment // by namespace/name
	statefulSet map[string]*appsv1.StatefulSet
	jobs        map[string]*batchv1.Job
	// operatorJobs are the PyTorchJobs and TrainJobs of workloads whose
	// pods an operator creates.
	operatorJobs map[string]*unstructured.Unstructured
	classes      map[string]*resourcev1.DeviceClass // by name, of the claims
}

// The controllers a workload's status reads.
var (
	deployments  = view.ManagedKind("apps", "Deployment")
	statefulSets = view.ManagedKind("apps", "StatefulSet")
	jobs         = view.ManagedKind("batch", "Job")
)

// NamespaceReads are the resources Load reads in w's namespace: its
// controller's kind, and its pods unless it is scaled to zero (then Load
// reads them only if its controller has some left). Its pods' claims are
// read only for pods that have them, its namespace's warning events only
// when it lacks pods.
func NamespaceReads(w *spec.Workload) []view.Resource {
	var out []view.Resource
	switch {
	case w.ByOperator():
	case w.Kind == spec.KindStatefulSet:
		out = append(out, statefulSets)
	case w.Kind == spec.KindJob:
		out = append(out, jobs)
	default:
		out = append(out, deployments)
	}
	if w.Pods() > 0 || w.Autoscaled() || w.Kind == spec.KindJob {
		out = append(out, view.Pods)
	}
	return out
}

// Load takes what the workloads' status needs from the engine's view:
// each one's controller, its pods and their claims, and the warnings of
// its namespace — no more than the workloads' own objects.
func Load(ctx context.Context, v *view.View, workloads []*spec.Workload) (*Snapshot, error) {
	s := &Snapshot{
		pods: map[string][]corev1.Pod{}, claims: map[string]map[string]*resourcev1.ResourceClaim{}, events: map[string][]corev1.Event{},
		deployments: map[string]*appsv1.Deployment{}, statefulSet: map[string]*appsv1.StatefulSet{}, jobs: map[string]*batchv1.Job{},
		operatorJobs: map[string]*unstructured.Unstructured{}, classes: map[string]*resourcev1.DeviceClass{},
	}
	if len(workloads) == 0 {
		return s, nil
	}
	for _, w := range workloads {
		v.WarmIn([]string{w.Namespace}, NamespaceReads(w)...)
	}
	v.Warm(deviceClasses) // the packages' classes, which the engine reads anyway
	warned := map[string]bool{}
	for _, w := range workloads {
		if err := s.loadController(ctx, v, w); err != nil {
			return nil, err
		}
		if err := s.loadPods(ctx, v, w); err != nil {
			return nil, err
		}
		// Warnings only explain pods that are missing or not scheduled
		// (Diagnose reads them for nothing else), so a namespace whose
		// workloads have all theirs on nodes is not listed: a plan of
		// healthy workloads watches no events.
		if !warned[w.Namespace] && s.lacksPods(w) {
			warned[w.Namespace] = true
			events, err := v.List(ctx, view.WarningEvents, w.Namespace)
			if err != nil {
				return nil, fmt.Errorf("list the warnings in %s: %w", w.Namespace, err)
			}
			for _, e := range view.Typed[corev1.Event](events) {
				s.events[w.Namespace] = append(s.events[w.Namespace], *e)
			}
		}
	}
	return s, s.loadClasses(ctx, v)
}

// loadController takes the workload's controller, when it exists: its
// Deployment, StatefulSet, Job, or the PyTorchJob or TrainJob an operator
// runs.
func (s *Snapshot) loadController(ctx context.Context, v *view.View, w *spec.Workload) error {
	key := w.Namespace + "/" + w.Name
	switch w.Kind {
	case spec.KindDeployment:
		d, err := get[appsv1.Deployment](ctx, v, deployments, w)
		if err != nil {
			return err
		}
		if d != nil {
			s.deployments[key] = d
		}
	case spec.KindStatefulSet:
		st, err := get[appsv1.StatefulSet](ctx, v, statefulSets, w)
		if err != nil {
			return err
		}
		if st != nil {
			s.statefulSet[key] = st
		}
	case spec.KindJob:
		if w.ByOperator() {
			j, err := operatorJobOf(w).load(ctx, v, w)
			if err != nil {
				return err
			}
			if j != nil {
				s.operatorJobs[key] = j
			}
			break
		}
		j, err := get[batchv1.Job](ctx, v, jobs, w)
		if err != nil {
			return err
		}
		if j != nil {
			s.jobs[key] = j
		}
	}
	return nil
}

// loadPods takes the workload's pods and the claims they were given;
// none for a workload whose controller has none (scaledToZero).
func (s *Snapshot) loadPods(ctx context.Context, v *view.View, w *spec.Workload) error {
	key := w.Namespace + "/" + w.Name
	if s.scaledToZero(w) {
		return nil
	}
	pods, err := v.ByIndex(ctx, view.Pods, w.Namespace, view.IndexWorkload, key)
	if err != nil {
		return fmt.Errorf("list the pods of %s: %w", key, err)
	}
	if s.claims[w.Namespace] == nil {
		s.claims[w.Namespace] = map[string]*resourcev1.ResourceClaim{}
	}
	for _, pod := range view.Typed[corev1.Pod](pods) {
		s.pods[w.Namespace] = append(s.pods[w.Namespace], *pod)
		for _, cs := range pod.Status.ResourceClaimStatuses {
			if cs.ResourceClaimName == nil {
				continue
			}
			c, err := v.Get(ctx, view.WorkloadClaims, w.Namespace, *cs.ResourceClaimName)
			if err != nil {
				return fmt.Errorf("read the claims of %s: %w", key, err)
			}
			if c, ok := c.(*resourcev1.ResourceClaim); ok {
				s.claims[w.Namespace][c.Name] = c
			}
		}
	}
	return nil
}

// scaledToZero says whether w's Deployment or StatefulSet wants no pod
// and reports none: then it has no pods to read, and a namespace of such
// workloads is diagnosed without reading its pods. A new one its
// controller has not reported on yet has none either, so this does not
// wait for the controller, and a plan right after an apply reads the same
// as a later one. (Pods that carry the workload's label but are not its
// controller's are not its replicas.)
func (s *Snapshot) scaledToZero(w *spec.Workload) bool {
	key := w.Namespace + "/" + w.Name
	switch w.Kind {
	case spec.KindDeployment:
		d := s.deployments[key]
		return d != nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 && d.Status.Replicas == 0
	case spec.KindStatefulSet:
		st := s.statefulSet[key]
		return st != nil && st.Spec.Replicas != nil && *st.Spec.Replicas == 0 && st.Status.Replicas == 0
	}
	return false
}

func get[T any](ctx context.Context, v *view.View, res view.Resource, w *spec.Workload) (*T, error) {
	obj, err := v.Get(ctx, res, w.Namespace, w.Name)
	if err != nil {
		return nil, fmt.Errorf("read the %s of %s/%s: %w", res.Kind, w.Namespace, w.Name, err)
	}
	return view.As[T](obj)
}

// lacksPods reports whether the workload has fewer pods than it wants or
// one not on a node yet.
func (s *Snapshot) lacksPods(w *spec.Workload) bool {
	pods := s.podsOf(w)
	if int32(len(pods)) < s.wanted(w) {
		return true
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			return true
		}
	}
	return false
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
			return name, devices(c.Status.Allocation.Devices.Results)
		}
		return name, ""
	}
	return "", ""
}

// capacityAsked is what the pod's claim asks of a shared device (an
// any-size slice's memory and compute, a time-sliced slice's shares of a
// GPU), in words, "" for a fraction's claim; and whether it is time-sliced.
func (s *Snapshot) capacityAsked(pod *corev1.Pod) (string, bool) {
	for _, cs := range pod.Status.ResourceClaimStatuses {
		if cs.ResourceClaimName == nil {
			continue
		}
		c := s.claims[pod.Namespace][*cs.ResourceClaimName]
		if c == nil {
			continue
		}
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly == nil || r.Exactly.Capacity == nil {
				continue
			}
			q := r.Exactly.Capacity.Requests
			if shares, ok := q[contract.CapacityShares]; ok {
				return fmt.Sprintf("1/%d of its time-sliced shares", contract.TimeSliceShares/max(shares.Value(), 1)), true
			}
			memory, compute := q[contract.CapacityMemory], q[contract.CapacityCompute]
			return fmt.Sprintf("%s of memory and %s %% of its compute", memory.String(), compute.String()), false
		}
	}
	return "", false
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
