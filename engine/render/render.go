// Package render turns a spec.Stack into the Kubernetes objects that carry
// it out: a DeviceClass per package, labels and a ResourceQuota per quota,
// and per workload a ResourceClaimTemplate in the documented shape, the
// Deployment/StatefulSet/Job using it, its volume, Service and preload Job.
// Rendering is pure: the same stack always gives the same objects.
package render

import (
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// object converts a typed object to the unstructured form apply sends,
// without the empty fields typed structs always serialise.
func object(address string, typed runtime.Object, apiVersion, kind string) (objects.Object, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return objects.Object{}, fmt.Errorf("render %s %s: %w", kind, address, err)
	}
	delete(m, "status") // written by controllers, never applied
	prune(m)
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return objects.Object{Address: address, Obj: u}, nil
}

// prune removes nulls and empty maps and lists, which carry no intent and
// would otherwise claim fields under server-side apply. emptyDir: {} is
// meaningful and kept.
func prune(m map[string]any) bool {
	for k, v := range m {
		switch t := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			if k == "emptyDir" {
				continue
			}
			if prune(t) {
				delete(m, k)
			}
		case []any:
			for _, e := range t {
				if em, ok := e.(map[string]any); ok {
					prune(em)
				}
			}
			if len(t) == 0 {
				delete(m, k)
			}
		}
	}
	return len(m) == 0
}
