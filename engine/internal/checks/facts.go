package checks

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/capacity"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Facts is what the cluster says, read once per plan.
type Facts struct {
	// ComputeCapability by GPU model, as the node plugins publish it.
	ComputeCapability map[string]string
	// Packages applied to the cluster, from their DeviceClasses: the
	// provider checks a workload without the package in its stack.
	Packages map[string]*Package
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
	// KEDA says whether KEDA's ScaledObject CRD is installed; nil when
	// unknown or not asked (no workload scales with KEDA).
	KEDA *bool
	// PyTorchJob says whether Kubeflow's PyTorchJob CRD is installed; nil
	// when unknown or not asked (no workload sets training_operator).
	PyTorchJob *bool
	// TrainJob says whether Kubeflow Trainer's TrainJob and
	// TrainingRuntime CRDs are installed; nil when unknown or not asked.
	TrainJob *bool
	// FreeByNode by package, then node: a pod's devices are all on one
	// node, so a multi-GPU pod needs that many free on one.
	FreeByNode map[string]map[string]int64
	// Published is, by GPU model, how many devices of each sharing
	// (contract.Sharing*) the node plugins publish.
	Published map[string]map[string]int
	// PublishedMIG is, by GPU model, how many MIG instances of each
	// profile the node plugins publish.
	PublishedMIG map[string]map[string]int
	// MultiAllocDropped is, by GPU model, whether shared devices were
	// published without allowMultipleAllocations: the API server dropped
	// it (DRAConsumableCapacity off).
	MultiAllocDropped map[string]bool
	// ConsumableCapacity says whether the API server has the
	// DRAConsumableCapacity feature on; nil when unknown or not asked (no
	// any-size or time-sliced package).
	ConsumableCapacity *bool
}

// Quota is one ResourceQuota.
type Quota struct {
	Name       string
	Hard, Used corev1.ResourceList
}

// Usage is what a workload's pods take from the namespace's quota.
type Usage struct {
	Pods int64 // each holds one claim
	// Slices the pods' claims hold: gpus_per_pod each, as their pod
	// template's annotation says.
	Slices int64
	// Quota resources: requests.cpu, requests.memory, limits.cpu, limits.memory.
	Resources corev1.ResourceList
}

var deviceClasses = view.ManagedKind("resource.k8s.io", "DeviceClass")

// Reads are the cluster-wide resources Gather reads: what the node
// plugins publish, and the packages. (Free slices also need every claim's
// allocation, read only when a workload wants pods it does not run.)
func Reads() []view.Resource {
	return []view.Resource{view.ResourceSlices, deviceClasses}
}

// NamespaceReads are the resources Gather reads in w's namespace: its
// quotas, and the workloads' pods where w wants pods (PodsWanted).
// LimitRanges are read only where a quota limits what a workload that
// wants pods leaves unset (needsLimitRanges), once the quotas are known.
func NamespaceReads(w *spec.Workload) []view.Resource {
	if PodsWanted(w) {
		return []view.Resource{view.ResourceQuotas, view.Pods}
	}
	return []view.Resource{view.ResourceQuotas}
}

// PodsWanted says whether the checks need what w's pods hold now: only
// for a workload that wants pods (or runs a preload Job, or an autoscaler
// scales it), whose charge they offset. A workload scaled to zero needs
// nothing from its namespace's quota and no free slice, so a namespace
// of such workloads is charged without reading its pods.
func PodsWanted(w *spec.Workload) bool {
	return chargedReplicas(w) > 0 || w.Autoscaled() || len(w.PreloadModels) > 0
}

// Gather reads the facts the checks need for the stack's workloads from
// the engine's view: the published slices, the packages, and the quotas,
// limit ranges and workload pods of the workloads' namespaces; and, when a
// workload wants more pods than it runs, the slices allocated, to count
// the free ones.
func Gather(ctx context.Context, v *view.View, s *spec.Stack) (*Facts, error) {
	f := &Facts{ComputeCapability: map[string]string{}, Packages: map[string]*Package{}, Quotas: map[string][]Quota{},
		LimitRanges: map[string]bool{}, Running: map[string]Usage{}, Published: map[string]map[string]int{}, PublishedMIG: map[string]map[string]int{},
		MultiAllocDropped: map[string]bool{}}
	if len(s.Workloads) == 0 && !s.HasPublishedKindPackages() {
		return f, nil
	}
	var namespaces []string
	for _, w := range s.Workloads {
		namespaces = append(namespaces, w.Namespace)
		v.WarmIn([]string{w.Namespace}, NamespaceReads(w)...)
	}
	v.Warm(Reads()...)
	snap, err := capacity.Published(ctx, v)
	if err != nil {
		return nil, err
	}
	for _, g := range snap.GPUs() {
		if g.ComputeCapability != "" {
			f.ComputeCapability[g.Model] = g.ComputeCapability
		}
	}
	for _, d := range snap.Devices() {
		if f.Published[d.Model] == nil {
			f.Published[d.Model] = map[string]int{}
		}
		f.Published[d.Model][d.Sharing]++
		switch d.Sharing {
		case contract.SharingAnySize, contract.SharingTimeSliced:
			if !d.MultipleAllocations {
				f.MultiAllocDropped[d.Model] = true
			}
		case contract.SharingMIG:
			if f.PublishedMIG[d.Model] == nil {
				f.PublishedMIG[d.Model] = map[string]int{}
			}
			f.PublishedMIG[d.Model][d.MIGProfile]++
		}
	}
	objs, err := v.List(ctx, deviceClasses)
	if err != nil {
		return nil, fmt.Errorf("list DeviceClasses: %w", err)
	}
	for _, o := range objs {
		dc, err := view.As[resourcev1.DeviceClass](o)
		if err != nil {
			return nil, err
		}
		if p, err := render.PackageOf(dc); err == nil {
			f.Packages[p.Name] = p
		}
	}
	if err := f.read(ctx, v, s, namespaces); err != nil {
		return nil, err
	}
	// Free slices of the packages of the workloads that want more pods
	// than they run, honouring the GPUs' shared counters. The others need
	// none, so a plan of running workloads reads no claim.
	f.FreeSlices, f.FreeByNode = map[string]int64{}, map[string]map[string]int64{}
	var short []*Package
	for _, w := range s.Workloads {
		if p := packageOf(s, f, w.Package); p != nil && f.wanted(w) > 0 {
			short = append(short, p)
		}
	}
	if len(short) == 0 {
		return f, nil
	}
	if err := snap.ReadAllocations(ctx, v); err != nil {
		return nil, err
	}
	for _, p := range short {
		counts := snap.Package(p)
		f.FreeSlices[p.Name], f.FreeByNode[p.Name] = counts.Free, map[string]int64{}
		for _, n := range counts.Nodes {
			f.FreeByNode[p.Name][n.Node] = n.Free
		}
	}
	return f, nil
}

// wanted is how many pods a workload wants beyond those it runs now (whose
// slices it holds already).
func (f *Facts) wanted(w *spec.Workload) int64 {
	return int64(chargedReplicas(w)) - f.Running[w.Namespace+"/"+w.Name].Pods
}

// read takes the quotas, limit ranges and workload pods of the namespaces
// (limit ranges and pods only where the checks use them).
func (f *Facts) read(ctx context.Context, v *view.View, s *spec.Stack, namespaces []string) error {
	quotas, err := v.List(ctx, view.ResourceQuotas, namespaces...)
	if err != nil {
		return fmt.Errorf("list ResourceQuotas: %w", err)
	}
	typed, err := view.AllAs[corev1.ResourceQuota](quotas)
	if err != nil {
		return err
	}
	for _, q := range typed {
		f.Quotas[q.Namespace] = append(f.Quotas[q.Namespace], Quota{Name: q.Name, Hard: q.Spec.Hard, Used: q.Status.Used})
	}
	for _, qs := range f.Quotas {
		sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	}
	if ns := f.needsLimitRanges(s); len(ns) > 0 {
		limits, err := v.List(ctx, view.LimitRanges, ns...)
		if err != nil {
			return fmt.Errorf("list LimitRanges: %w", err)
		}
		for _, l := range view.Typed[corev1.LimitRange](limits) {
			f.LimitRanges[l.Namespace] = true
		}
	}
	var withPods []string
	for _, w := range s.Workloads {
		if PodsWanted(w) {
			withPods = append(withPods, w.Namespace)
		}
	}
	if len(withPods) == 0 {
		return nil
	}
	pods, err := v.List(ctx, view.Pods, withPods...)
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	f.addRunning(view.Typed[corev1.Pod](pods))
	return nil
}

// needsLimitRanges lists the namespaces where a workload that wants pods
// leaves unset what a quota there (live, or the stack's own) limits: a
// LimitRange can default it (quotas' "Quota needs" check).
func (f *Facts) needsLimitRanges(s *spec.Stack) []string {
	var out []string
	for _, w := range s.Workloads {
		if chargedReplicas(w) == 0 {
			continue
		}
		hard := []corev1.ResourceList{}
		for _, q := range f.Quotas[w.Namespace] {
			hard = append(hard, q.Hard)
		}
		for _, q := range s.Quotas {
			if q.Namespace == w.Namespace {
				hard = append(hard, render.QuotaHard(s, q))
			}
		}
		for _, a := range quotaAttrs {
			if a.value(w.Container) != "" {
				continue
			}
			for _, h := range hard {
				if _, limited := h[a.resource]; limited {
					out = append(out, w.Namespace)
				}
			}
		}
	}
	return dedupe(out)
}

func dedupe(xs []string) []string {
	sort.Strings(xs)
	return slices.Compact(xs)
}

// addRunning adds what the pods hold to their workloads' Running.
func (f *Facts) addRunning(pods []*corev1.Pod) {
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue // quota no longer counts finished pods
		}
		key := pod.Namespace + "/" + pod.Labels[objects.LabelWorkload]
		u := f.Running[key]
		if u.Resources == nil {
			u.Resources = corev1.ResourceList{}
		}
		u.Pods++
		u.Slices += slicesOf(pod)
		for _, c := range pod.Spec.Containers {
			addPodResources(u.Resources, c.Resources, 1)
		}
		f.Running[key] = u
	}
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
