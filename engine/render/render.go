// Package render turns a spec.Stack into the Kubernetes objects that carry
// it out: a DeviceClass per package, labels and a ResourceQuota per quota,
// and per workload a ResourceClaimTemplate in the documented shape, the
// Deployment/StatefulSet/Job using it, its volume, Service and preload Job.
// Rendering is pure: the same stack always gives the same objects.
package render

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Stack renders every resource of the stack, sorted in apply order.
func Stack(s *spec.Stack) ([]objects.Object, error) {
	r := renderer{stack: s}
	var out []objects.Object
	add := func(objs []objects.Object, err error) error {
		out = append(out, objs...)
		return err
	}
	if s.Platform != nil {
		if err := add(r.platform(s.Platform)); err != nil {
			return nil, err
		}
	}
	for _, p := range s.Packages {
		if err := add(r.pkg(p)); err != nil {
			return nil, err
		}
	}
	for _, q := range s.Quotas {
		if err := add(r.quota(q)); err != nil {
			return nil, err
		}
	}
	for _, w := range s.Workloads {
		if err := add(r.workload(w)); err != nil {
			return nil, err
		}
	}
	objects.Sort(out)
	return out, nil
}

type renderer struct{ stack *spec.Stack }

// meta returns object metadata with the stack's ownership labels and the
// resource's address.
func (r renderer) meta(address, namespace, name string, labels map[string]string) metav1.ObjectMeta {
	l := objects.OwnedLabels(r.stack.Name)
	maps.Copy(l, labels)
	return metav1.ObjectMeta{
		Name: name, Namespace: namespace, Labels: l,
		Annotations: map[string]string{objects.AnnotationAddress: address},
	}
}

// tenantLabel is the label key that marks tenant namespaces.
func (r renderer) tenantLabel() string {
	if r.stack.Platform != nil && r.stack.Platform.TenantLabel != "" {
		return r.stack.Platform.TenantLabel
	}
	return contract.LabelTenant
}

// object is typed, rendered for the resource at address.
func object(address string, typed runtime.Object, apiVersion, kind string) objects.Object {
	return objects.New(address, typed, apiVersion, kind)
}
