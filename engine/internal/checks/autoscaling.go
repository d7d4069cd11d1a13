package checks

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// slicesPerReplica is how many slices of its package one replica claims.
func slicesPerReplica(w *spec.Workload) int64 { return int64(w.DevicesPerPod()) }

// chargedReplicas is the replica count the quota and capacity checks
// charge: an autoscaled workload surely runs min_replicas; more are
// warned about by chargeAutoscaled.
func chargedReplicas(w *spec.Workload) int32 {
	if w.Autoscaling != nil {
		return w.Autoscaling.MinReplicas
	}
	return w.Pods()
}

// chargeAutoscaled: every replica the autoscaler starts needs its slice.
// min_replicas beyond what the grant leaves after the stack's other
// workloads could never run: an error. max_replicas beyond what is left
// now (slices held elsewhere count too): a warning, since replicas past it
// wait for a slice instead of serving load.
func (c *checker) chargeAutoscaled(w *spec.Workload, q Quota, left corev1.ResourceList) {
	key := render.DeviceQuotaResource(w.Package)
	l, limited := left[key]
	if !limited {
		return
	}
	hard := q.Hard[key]
	now := l.Value()
	per := slicesPerReplica(w)
	as := w.Autoscaling
	minNeed, maxNeed := int64(as.MinReplicas)*per, int64(as.MaxReplicas)*per
	others := c.stackCharge(w)
	switch {
	case hard.IsZero():
		c.errorf(w, "package", "Package not granted",
			"ResourceQuota %s in %s gives %s 0 slices, so the claims are refused and the workload never starts: grant it in the gpuslice_quota for %s (slices = { %q = %d })",
			q.Name, w.Namespace, w.Package, w.Namespace, w.Package, maxNeed)
	case minNeed > hard.Value()-others:
		c.errorf(w, "autoscaling.min_replicas", "min_replicas does not fit the quota",
			"min_replicas = %d needs %d %s slices, but the gpuslice_quota for %s grants %d and the stack's other workloads there take %d: the autoscaler's minimum could never run. Lower autoscaling.min_replicas or raise slices[%q]",
			as.MinReplicas, minNeed, w.Package, w.Namespace, hard.Value(), others, w.Package)
	case maxNeed > now:
		fits := max(now, 0) / per
		c.warnf(w, "autoscaling.max_replicas", "max_replicas exceeds the quota",
			"max_replicas = %d needs up to %d %s slices, but %d are left in %s (grant %d): replicas past %d will wait for a slice when the autoscaler starts them. Raise slices[%q] in the gpuslice_quota for %s or lower autoscaling.max_replicas",
			as.MaxReplicas, maxNeed, w.Package, max(now, 0), w.Namespace, hard.Value(), fits, w.Package, w.Namespace)
	}
	l.Sub(*resource.NewQuantity(minNeed, resource.DecimalSI))
	left[key] = l
}

// stackCharge is what the stack's workloads declared before w charge to
// w's package in w's namespace.
func (c *checker) stackCharge(w *spec.Workload) int64 {
	var n int64
	for _, o := range c.stack.Workloads {
		if o == w {
			break
		}
		if o.Namespace == w.Namespace && o.Package == w.Package {
			n += int64(chargedReplicas(o)) * slicesPerReplica(o)
		}
	}
	return n
}

// keda: a keda block needs KEDA's ScaledObject CRD, else the ScaledObject
// cannot be created and nothing would scale the workload.
func (c *checker) keda() {
	if c.facts.KEDA == nil || *c.facts.KEDA {
		return
	}
	for _, w := range c.stack.Workloads {
		if w.Autoscaling != nil && w.Autoscaling.KEDA != nil {
			c.errorf(w, "autoscaling.keda", "KEDA not installed",
				"the cluster does not serve KEDA's ScaledObject (keda.sh/v1alpha1), so nothing would scale %s: install KEDA (helm install keda kedacore/keda -n keda --create-namespace), or remove the keda block to scale with a HorizontalPodAutoscaler on cpu_utilization, memory_utilization or metric blocks",
				w.Name)
		}
	}
}
