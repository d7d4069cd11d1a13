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
