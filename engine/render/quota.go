package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// QuotaName is the name of the ResourceQuota a gpuslice_quota renders.
const QuotaName = "gpuslice"

// DeviceQuotaResource is the ResourceQuota key that counts a namespace's
// claims of a device class.
func DeviceQuotaResource(class string) corev1.ResourceName {
	return corev1.ResourceName(class + ".deviceclass.resource.k8s.io/devices")
}

// ExtendedQuotaResource is the ResourceQuota key that counts what a
// namespace's pods ask for by an extended resource name.
func ExtendedQuotaResource(name string) corev1.ResourceName {
	return corev1.ResourceName(corev1.DefaultResourceRequestsPrefix + name)
}

// ClaimCountResource counts ResourceClaims in a namespace.
const ClaimCountResource corev1.ResourceName = "count/resourceclaims.resource.k8s.io"

func (r renderer) quota(q *spec.Quota) ([]objects.Object, error) {
	// The namespace object carries only what gpuslice owns on it: the tenant
	// label. Server-side apply leaves everything else on it alone.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        q.Namespace,
		Labels:      map[string]string{r.tenantLabel(): "true"},
		Annotations: map[string]string{objects.AnnotationAddress: q.Address},
	}}
	nsObj := object(q.Address, ns, "v1", "Namespace")

	hard := QuotaHard(r.stack, q)
	rq := object(q.Address, &corev1.ResourceQuota{
		ObjectMeta: r.meta(q.Address, q.Namespace, QuotaName, nil),
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}, "v1", "ResourceQuota")
	binding, err := r.tenantRoleBinding(q)
	if err != nil {
		return nil, err
	}
	return append([]objects.Object{nsObj, rq}, binding...), nil
}

// QuotaHard is the ResourceQuota's hard limits for a quota of the stack.
func QuotaHard(s *spec.Stack, q *spec.Quota) corev1.ResourceList {
	hard := corev1.ResourceList{}
	// Every package of the stack gets an entry, 0 unless granted: a class
	// missing from a quota would be unlimited.
	for _, p := range s.Packages {
		hard[DeviceQuotaResource(p.Name)] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	for name, n := range q.Slices {
		hard[DeviceQuotaResource(name)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	// A package's extended resource name gets the package's grant too, as
	// requests.<name>: the quota then counts what pods ask for by that name
	// (and, DRAExtendedResource, the package's claims as well), and the
	// extended-resource grants policy reads the grant of a name a pod asks
	// for from it, since a name alone does not say its class.
	for _, p := range s.Packages {
		if p.ExtendedResourceName != "" {
			hard[ExtendedQuotaResource(p.ExtendedResourceName)] = *resource.NewQuantity(q.Slices[p.Name], resource.DecimalSI)
		}
	}
	for name, value := range map[corev1.ResourceName]string{
		corev1.ResourceRequestsCPU: q.CPURequests, corev1.ResourceRequestsMemory: q.MemoryRequests,
		corev1.ResourceLimitsCPU: q.CPULimits, corev1.ResourceLimitsMemory: q.MemoryLimits,
	} {
		if value != "" {
			hard[name] = resource.MustParse(value) // validated
		}
	}
	if q.MaxClaims != nil {
		hard[ClaimCountResource] = *resource.NewQuantity(*q.MaxClaims, resource.DecimalSI)
	}
	return hard
}
