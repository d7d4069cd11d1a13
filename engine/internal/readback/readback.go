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

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// managed reports whether gpuslice rendered an object with these labels.
func managed(labels map[string]string) bool {
	return labels[contract.LabelManagedBy] == contract.ManagedBy
}

// notFound turns a 404 into (nil, nil): the resource is gone.
func notFound(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// quantity returns live, or prior when both name the same amount ("4096Mi"
// and "4Gi"), so a value written one way never shows as a change.
func quantity(live resource.Quantity, prior string) string {
	if p, err := resource.ParseQuantity(prior); err == nil && p.Cmp(live) == 0 {
		return prior
	}
	return live.String()
}

// Platform reads the gpuslice_platform whose namespace is ns; nil when it
// is not applied. prior, when known, says whether the configuration lists
// the node plugin's tolerations or leaves them to the chart's default.
func Platform(ctx context.Context, c kubernetes.Interface, ns string, prior *spec.Platform) (*spec.Platform, error) {
	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, render.PlatformConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, notFound(err, "platform settings "+ns+"/"+render.PlatformConfigMap)
	}
	if !managed(cm.Labels) {
		return nil, nil
	}
	p, err := render.PlatformOf(cm)
	if err != nil {
		return nil, err
	}
	ds, err := c.AppsV1().DaemonSets(ns).Get(ctx, render.NodePluginDaemonSet, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("read the node plugin's DaemonSet %s/%s: %w", ns, render.NodePluginDaemonSet, err)
	case managed(ds.Labels):
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
	return p, nil
}

// Package reads the gpuslice_package named name from its DeviceClass; nil
// when it is not applied.
func Package(ctx context.Context, c kubernetes.Interface, name string) (*spec.Package, error) {
	dc, err := c.ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, notFound(err, "DeviceClass "+name)
	}
	if !managed(dc.Labels) || dc.Labels[contract.LabelPackage] == "" {
		return nil, nil
	}
	p, err := render.PackageOf(dc)
	if err != nil {
		return nil, err
	}
	// Read back is what a configuration holds; the slice's memory is
	// computed (Resolve) like for any other spec.
	p.Memory, p.MemoryBytes = "", 0
	return p, nil
}

const deviceQuotaSuffix = ".deviceclass.resource.k8s.io/devices"

// Quota reads the gpuslice_quota of namespace ns from its ResourceQuota;
// nil when it is not applied. Slices of 0 are read back only where prior
// lists them: every package the quota does not grant is 0.
func Quota(ctx context.Context, c kubernetes.Interface, ns string, prior *spec.Quota) (*spec.Quota, error) {
	rq, err := c.CoreV1().ResourceQuotas(ns).Get(ctx, render.QuotaName, metav1.GetOptions{})
	if err != nil {
		return nil, notFound(err, "ResourceQuota "+ns+"/"+render.QuotaName)
	}
	if !managed(rq.Labels) {
		return nil, nil
	}
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
	rb, err := c.RbacV1().RoleBindings(ns).Get(ctx, render.TenantRole, metav1.GetOptions{})
	if err != nil {
		if err := notFound(err, "RoleBinding "+ns+"/"+render.TenantRole); err != nil {
			return nil, err
		}
	} else if managed(rb.Labels) {
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
