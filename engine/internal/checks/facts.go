package checks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/capacity"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Facts is what the cluster says, read once per plan.
type Facts struct {
	// ComputeCapability by GPU model, as the node plugins publish it.
	ComputeCapability map[string]string
	// Packages applied to the cluster, from their DeviceClasses: the
	// provider checks a workload without the package in its stack.
	Packages map[string]Package
	// Quotas by namespace.
	Quotas map[string][]Quota
	// LimitRanges by namespace: whether one exists (it can default the
	// requests a quota demands).
	LimitRanges map[string]bool
	// Running is what each existing workload's pods hold now, by
	// "<namespace>/<name>": an update replaces them, so their share of the
	// quota comes back.
	Running map[string]Usage
	// FreeSlices by package: slices the scheduler could still allocate.
	// Missing when unknown.
	FreeSlices map[string]int64
}

// Quota is one ResourceQuota.
type Quota struct {
	Name       string
	Hard, Used corev1.ResourceList
}

// Usage is what a workload's pods take from the namespace's quota.
type Usage struct {
	Pods int64 // each holds one claim, so one slice
	// Quota resources: requests.cpu, requests.memory, limits.cpu, limits.memory.
	Resources corev1.ResourceList
}

// Gather reads the facts the checks need for the stack's workloads.
func Gather(ctx context.Context, client kubernetes.Interface, s *spec.Stack) (*Facts, error) {
	f := &Facts{ComputeCapability: map[string]string{}, Packages: map[string]Package{}, Quotas: map[string][]Quota{},
		LimitRanges: map[string]bool{}, Running: map[string]Usage{}}
	if len(s.Workloads) == 0 {
		return f, nil
	}
	snap, err := capacity.Load(ctx, client)
	if err != nil {
		return nil, err
	}
	for _, g := range snap.GPUs() {
		if g.ComputeCapability != "" {
			f.ComputeCapability[g.Model] = g.ComputeCapability
		}
	}
	classes, err := client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{LabelSelector: contract.LabelManagedBy + "=" + contract.ManagedBy})
	if err != nil {
		return nil, fmt.Errorf("list DeviceClasses: %w", err)
	}
	for i := range classes.Items {
		if p, err := render.PackageOf(&classes.Items[i]); err == nil {
			f.Packages[p.Name] = Package{Name: p.Name, GPUModel: p.GPUModel, Fraction: p.Fraction, MemoryBytes: p.MemoryBytes}
		}
	}
	// Free slices of every package the workloads use, honouring the GPUs'
	// shared counters.
	f.FreeSlices = map[string]int64{}
	for _, w := range s.Workloads {
		if p := packageOf(s, f, w.Package); p != nil {
			f.FreeSlices[p.Name] = snap.Package(p.Name, p.GPUModel, p.Fraction).Free
		}
	}
	namespaces := map[string]bool{}
	for _, w := range s.Workloads {
		namespaces[w.Namespace] = true
	}
	// One cluster-wide list per kind keeps plan's requests flat however many
	// namespaces the stack has; without the right to list cluster-wide, one
	// list per namespace.
	if len(namespaces) > 1 {
		err := f.read(ctx, client, metav1.NamespaceAll, namespaces)
		if err == nil || !apierrors.IsForbidden(err) {
			return f, err
		}
	}
	for ns := range namespaces {
		if err := f.read(ctx, client, ns, namespaces); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// read lists the quotas, limit ranges and workload pods of namespace ns
// ("" for all) and keeps those of the wanted namespaces.
func (f *Facts) read(ctx context.Context, client kubernetes.Interface, ns string, wanted map[string]bool) error {
	where := "in " + ns
	if ns == metav1.NamespaceAll {
		where = "in all namespaces"
	}
	quotas, err := client.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ResourceQuotas %s: %w", where, err)
	}
	for _, q := range quotas.Items {
		if wanted[q.Namespace] {
			f.Quotas[q.Namespace] = append(f.Quotas[q.Namespace], Quota{Name: q.Name, Hard: q.Spec.Hard, Used: q.Status.Used})
		}
	}
	limits, err := client.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list LimitRanges %s: %w", where, err)
	}
	for _, l := range limits.Items {
		f.LimitRanges[l.Namespace] = true
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: objects.LabelWorkload})
	if err != nil {
		return fmt.Errorf("list pods %s: %w", where, err)
	}
	for _, pod := range pods.Items {
		if !wanted[pod.Namespace] || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue // quota no longer counts finished pods
		}
		key := pod.Namespace + "/" + pod.Labels[objects.LabelWorkload]
		u := f.Running[key]
		if u.Resources == nil {
			u.Resources = corev1.ResourceList{}
		}
		u.Pods++
		for _, c := range pod.Spec.Containers {
			addPodResources(u.Resources, c.Resources, 1)
		}
		f.Running[key] = u
	}
	return nil
}

// addPodResources adds n pods' worth of a container's resources, under the
// names a ResourceQuota counts them by.
func addPodResources(to corev1.ResourceList, r corev1.ResourceRequirements, n int64) {
	for _, x := range []struct {
		quota corev1.ResourceName
		list  corev1.ResourceList
		name  corev1.ResourceName
	}{
		{corev1.ResourceRequestsCPU, r.Requests, corev1.ResourceCPU},
		{corev1.ResourceRequestsMemory, r.Requests, corev1.ResourceMemory},
		{corev1.ResourceLimitsCPU, r.Limits, corev1.ResourceCPU},
		{corev1.ResourceLimitsMemory, r.Limits, corev1.ResourceMemory},
	} {
		q, ok := x.list[x.name]
		if !ok {
			continue
		}
		sum := to[x.quota]
		for range n {
			sum.Add(q)
		}
		to[x.quota] = sum
	}
}
