package checks

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// quotaAttrs maps the pooled quota resources to the container attribute
// that sets them.
var quotaAttrs = []struct {
	resource corev1.ResourceName
	attr     string
	value    func(c spec.Container) string
}{
	{corev1.ResourceRequestsCPU, "container.cpu_request", func(c spec.Container) string { return c.CPURequest }},
	{corev1.ResourceRequestsMemory, "container.memory_request", func(c spec.Container) string { return c.MemoryRequest }},
	{corev1.ResourceLimitsCPU, "container.cpu_limit", func(c spec.Container) string { return c.CPULimit }},
	{corev1.ResourceLimitsMemory, "container.memory_limit", func(c spec.Container) string { return c.MemoryLimit }},
}

// quotas: would the namespace's quotas admit the workload's pods and claims?
// A pod the quota refuses is never created, so the workload would sit
// unstarted with nothing in its status: say so at plan time, with what is
// left. Workloads of one namespace are charged in order, after giving back
// what their current pods hold (an update replaces them).
func (c *checker) quotas() {
	byNamespace := map[string][]*spec.Workload{}
	var order []string
	for _, w := range c.stack.Workloads {
		if byNamespace[w.Namespace] == nil {
			order = append(order, w.Namespace)
		}
		byNamespace[w.Namespace] = append(byNamespace[w.Namespace], w)
	}
	for _, ns := range order {
		for _, q := range c.effectiveQuotas(ns) {
			c.chargeQuota(ns, q, byNamespace[ns])
		}
	}
}

// effectiveQuotas are the namespace's quotas as they will be after apply:
// the stack's own gpuslice_quota replaces the live one.
func (c *checker) effectiveQuotas(ns string) []Quota {
	var out []Quota
	var desired *spec.Quota
	for _, q := range c.stack.Quotas {
		if q.Namespace == ns {
			desired = q
		}
	}
	live := c.facts.Quotas[ns]
	for _, q := range live {
		if desired != nil && q.Name == render.QuotaName {
			continue
		}
		out = append(out, q)
	}
	if desired != nil {
		q := Quota{Name: render.QuotaName, Hard: render.QuotaHard(c.stack, desired), Used: corev1.ResourceList{}}
		for _, l := range live {
			if l.Name == render.QuotaName {
				q.Used = l.Used
			}
		}
		out = append(out, q)
	}
	return out
}

func (c *checker) chargeQuota(ns string, q Quota, workloads []*spec.Workload) {
	left := corev1.ResourceList{}
	for name, hard := range q.Hard {
		l := hard.DeepCopy()
		if used, ok := q.Used[name]; ok {
			l.Sub(used)
		}
		left[name] = l
	}
	// What the stack's workloads hold now comes back when apply replaces them.
	for _, w := range workloads {
		running := c.facts.Running[ns+"/"+w.Name]
		for name, q := range running.Resources {
			if l, ok := left[name]; ok {
				l.Add(q)
				left[name] = l
			}
		}
		if l, ok := left[render.DeviceQuotaResource(w.Package)]; ok {
			l.Add(*resource.NewQuantity(running.Slices, resource.DecimalSI))
			left[render.DeviceQuotaResource(w.Package)] = l
		}
	}
	for _, w := range workloads {
		c.chargeResources(w, q, left)
		c.chargeSlices(w, q, left)
	}
}

func (c *checker) chargeResources(w *spec.Workload, q Quota, left corev1.ResourceList) {
	need := corev1.ResourceList{}
	perPod := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, a := range quotaAttrs {
		v := a.value(w.Container)
		if v == "" {
			continue
		}
		qty, err := resource.ParseQuantity(v)
		if err != nil {
			return // reported by validation
		}
		switch a.resource {
		case corev1.ResourceRequestsCPU:
			perPod.Requests[corev1.ResourceCPU] = qty
		case corev1.ResourceRequestsMemory:
			perPod.Requests[corev1.ResourceMemory] = qty
		case corev1.ResourceLimitsCPU:
			perPod.Limits[corev1.ResourceCPU] = qty
		case corev1.ResourceLimitsMemory:
			perPod.Limits[corev1.ResourceMemory] = qty
		}
	}
	addPodResources(need, perPod, int64(chargedReplicas(w)))
	if len(w.PreloadModels) > 0 {
		addPodResources(need, render.PreloadResources(), 1)
	}
	for _, a := range quotaAttrs {
		l, limited := left[a.resource]
		if !limited {
			continue
		}
		if a.value(w.Container) == "" {
			if !c.facts.LimitRanges[w.Namespace] && chargedReplicas(w) > 0 {
				c.errorf(w, a.attr, "Quota needs "+string(a.resource),
					"ResourceQuota %s in %s limits %s, so pods that do not set it are refused and the workload never starts: set %s",
					q.Name, w.Namespace, a.resource, a.attr)
			}
			continue
		}
		// A workload that needs none (scaled to zero) is refused nothing,
		// however overdrawn the quota; its pods are not read (PodsWanted).
		n := need[a.resource]
		if !n.IsZero() && n.Cmp(l) > 0 {
			c.errorf(w, a.attr, "Not enough quota",
				"ResourceQuota %s in %s has %s of %s left (hard %s); this workload needs %s (%s). The pods would be refused and the workload would sit unstarted: raise the quota (gpuslice_quota for %s) or lower %s",
				q.Name, w.Namespace, nonNegative(l), a.resource, q.Hard.Name(a.resource, resource.DecimalSI), &n, perReplica(w, a.value(w.Container)), w.Namespace, a.attr)
		}
		l.Sub(n)
		left[a.resource] = l
	}
}

func (c *checker) chargeSlices(w *spec.Workload, q Quota, left corev1.ResourceList) {
	if w.Autoscaled() {
		c.chargeAutoscaled(w, q, left)
		return
	}
	key := render.DeviceQuotaResource(w.Package)
	l, limited := left[key]
	need := w.Slices()
	if !limited || need == 0 {
		return
	}
	hard := q.Hard[key]
	switch {
	case hard.IsZero():
		c.errorf(w, "package", "Package not granted",
			"ResourceQuota %s in %s gives %s 0 slices, so the claims are refused and the workload never starts: grant it in the gpuslice_quota for %s (slices = { %q = %d })",
			q.Name, w.Namespace, w.Package, w.Namespace, w.Package, need)
	case c.beyondGrant(w, q, hard.Value()):
	case l.Value() < need:
		held := hard.Value() - l.Value()
		c.warnf(w, "package", "Slices already held",
			"%d of %d %s slices already held in %s: this workload will wait until %d free up (or raise slices[%q] in the gpuslice_quota for %s)",
			held, hard.Value(), w.Package, w.Namespace, need-max(l.Value(), 0), w.Package, w.Namespace)
	}
	l.Sub(*resource.NewQuantity(need, resource.DecimalSI))
	left[key] = l
}

func nonNegative(q resource.Quantity) string {
	if q.Sign() < 0 {
		return "nothing"
	}
	return q.String()
}

func perReplica(w *spec.Workload, v string) string {
	s := fmt.Sprintf("%d × %s", chargedReplicas(w), v)
	if len(w.PreloadModels) > 0 {
		s += " + the preload Job"
	}
	return s
}
