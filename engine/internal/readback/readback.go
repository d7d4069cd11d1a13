// Package readback reads a resource's objects in the cluster back into its
// spec, for the Terraform provider's Read and import: an attribute changed
// outside gpuslice shows up as that attribute's change in the next plan,
// and an imported resource gets every attribute the cluster records.
// Attributes the cluster does not record (a workload's wait_for and
// timeout) come from the prior spec, else their defaults.
package readback

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// managed reports whether gpuslice rendered an object with these labels.
func managed(labels map[string]string) bool {
	return labels[contract.LabelManagedBy] == contract.ManagedBy
}

// get reads the object of a kind gpuslice renders from the engine's view,
// as type T; nil when there is none.
func get[T any](ctx context.Context, v *view.View, group, kind, ns, name string) (*T, error) {
	obj, err := v.Get(ctx, view.ManagedKind(group, kind), ns, name)
	if err != nil {
		what := kind + " " + name
		if ns != "" {
			what = kind + " " + ns + "/" + name
		}
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return view.As[T](obj)
}

// quantity returns live, or prior when both name the same amount ("4096Mi"
// and "4Gi"), so a value written one way never shows as a change.
func quantity(live resource.Quantity, prior string) string {
	if p, err := resource.ParseQuantity(prior); err == nil && p.Cmp(live) == 0 {
		return prior
	}
	return live.String()
}

// PlatformReads are the resources Platform reads, in the platform's
// namespace.
func PlatformReads() []view.Resource {
	return []view.Resource{view.ManagedKind("", "ConfigMap"), view.ManagedKind("apps", "DaemonSet"), view.ManagedKind("apps", "Deployment")}
}

// Platform reads the gpuslice_platform whose namespace is ns; nil when it
// is not applied. prior, when known, says whether the configuration lists
// the node plugin's tolerations or leaves them to the chart's default.
func Platform(ctx context.Context, v *view.View, ns string, prior *spec.Platform) (*spec.Platform, error) {
	v.WarmIn([]string{ns}, PlatformReads()...)
	cm, err := get[corev1.ConfigMap](ctx, v, "", "ConfigMap", ns, render.PlatformConfigMap)
	if cm == nil || err != nil {
		return nil, err
	}
	if !managed(cm.Labels) {
		return nil, nil
	}
	p, err := render.PlatformOf(cm)
	if err != nil {
		return nil, err
	}
	ds, err := get[appsv1.DaemonSet](ctx, v, "apps", "DaemonSet", ns, render.NodePluginDaemonSet)
	switch {
	case err != nil:
		return nil, err
	case ds != nil && managed(ds.Labels):
		if p.NodePlugin, err = render.NodePluginOf(ds); err != nil {
			return nil, err
		}
		if prior == nil || prior.NodePlugin == nil || len(prior.NodePlugin.Tolerations) == 0 {
			// Tolerations nobody wrote are the chart's default, not a difference.
			if render.DefaultTolerations(p.NodePlugin.Tolerations) {
				p.NodePlugin.Tolerations = nil
			}
		}
	}
	// The reconciler's Deployment is named after its stack, which only the
	// configuration knows: an import without one does not see it.
	if prior != nil && prior.Reconcile != nil {
		d, err := get[appsv1.Deployment](ctx, v, "apps", "Deployment", ns, render.ReconcileDeployment(prior.Reconcile.Stack))
		if err != nil {
			return nil, err
		}
		if d != nil && managed(d.Labels) {
			if p.Reconcile, err = render.ReconcileOf(d); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// Package reads the gpuslice_package named name from its DeviceClass; nil
// when it is not applied.
func Package(ctx context.Context, v *view.View, name string) (*spec.Package, error) {
	dc, err := get[resourcev1.DeviceClass](ctx, v, "resource.k8s.io", "DeviceClass", "", name)
	if dc == nil || err != nil {
		return nil, err
	}
	if !managed(dc.Labels) || dc.Labels[contract.LabelPackage] == "" {
		return nil, nil
	}
	p, err := render.PackageOf(dc)
	if err != nil {
		return nil, err
	}
	// Read back is what a configuration holds: an any-size package's memory
	// and compute share; what the other kinds infer from their fraction or
	// the GPU is inferred again (Resolve), like for any other spec.
	p.MemoryBytes = 0
	if p.Kind() != contract.SharingAnySize {
		p.Memory, p.ComputeShare = "", 0
	}
	return p, nil
}

const deviceQuotaSuffix = ".deviceclass.resource.k8s.io/devices"

// QuotaReads are the resources Quota reads in the quota's namespace,
// given its prior (nil, or an import's): its tenants' RoleBinding only
// when prior has tenants, or is not a configuration's.
func QuotaReads(prior *spec.Quota) []view.Resource {
	if !importingQuota(prior) && !hasTenants(prior) {
		return []view.Resource{resourceQuotas}
	}
	return []view.Resource{resourceQuotas, roleBindings}
}

var (
	resourceQuotas = view.ManagedKind("", "ResourceQuota")
	roleBindings   = view.ManagedKind("rbac.authorization.k8s.io", "RoleBinding")
)

// importingQuota says whether prior is not a quota's configuration but
// nothing, or an import's state, which names the namespace alone (without
// the slices every configuration sets).
func importingQuota(prior *spec.Quota) bool { return prior == nil || prior.Slices == nil }

func hasTenants(q *spec.Quota) bool { return len(q.TenantUsers)+len(q.TenantGroups) > 0 }

// Quota reads the gpuslice_quota of namespace ns from its ResourceQuota;
// nil when it is not applied. Slices of 0 are read back only where prior
// lists them: every package the quota does not grant is 0.
func Quota(ctx context.Context, v *view.View, ns string, prior *spec.Quota) (*spec.Quota, error) {
	v.WarmIn([]string{ns}, QuotaReads(prior)...)
	rq, err := get[corev1.ResourceQuota](ctx, v, "", "ResourceQuota", ns, render.QuotaName)
	if rq == nil || err != nil {
		return nil, err
	}
	if !managed(rq.Labels) {
		return nil, nil
	}
	imported := importingQuota(prior)
	if prior == nil {
		prior = &spec.Quota{}
	}
	q := &spec.Quota{Namespace: ns, Slices: map[string]int64{}}
	for name, value := range rq.Spec.Hard {
		class, ok := strings.CutSuffix(string(name), deviceQuotaSuffix)
		if !ok {
			continue
		}
		n := value.Value()
		if _, listed := prior.Slices[class]; n != 0 || listed {
			q.Slices[class] = n
		}
	}
	pooled := []struct {
		name  corev1.ResourceName
		field *string
		prior string
	}{
		{corev1.ResourceRequestsCPU, &q.CPURequests, prior.CPURequests},
		{corev1.ResourceRequestsMemory, &q.MemoryRequests, prior.MemoryRequests},
		{corev1.ResourceLimitsCPU, &q.CPULimits, prior.CPULimits},
		{corev1.ResourceLimitsMemory, &q.MemoryLimits, prior.MemoryLimits},
	}
	for _, r := range pooled {
		if v, ok := rq.Spec.Hard[r.name]; ok {
			*r.field = quantity(v, r.prior)
		}
	}
	if v, ok := rq.Spec.Hard[render.ClaimCountResource]; ok {
		n := v.Value()
		q.MaxClaims = &n
	}
	if !imported && !hasTenants(prior) {
		return q, nil // gpuslice renders no RoleBinding without tenants
	}
	rb, err := get[rbacv1.RoleBinding](ctx, v, "rbac.authorization.k8s.io", "RoleBinding", ns, render.TenantRole)
	if err != nil {
		return nil, err
	}
	if rb != nil && managed(rb.Labels) {
		for _, s := range rb.Subjects {
			switch s.Kind {
			case rbacv1.UserKind:
				q.TenantUsers = append(q.TenantUsers, s.Name)
			case rbacv1.GroupKind:
				q.TenantGroups = append(q.TenantGroups, s.Name)
			}
		}
	}
	return q, nil
}
