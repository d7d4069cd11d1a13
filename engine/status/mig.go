package status

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/view"
)

// deviceClasses are the packages' classes: a claim's class says whether
// its slice is a MIG instance.
var deviceClasses = view.ManagedKind("resource.k8s.io", "DeviceClass")

// loadClasses reads the classes the loaded claims ask for.
func (s *Snapshot) loadClasses(ctx context.Context, v *view.View) error {
	for _, claims := range s.claims {
		for _, c := range claims {
			for _, r := range c.Spec.Devices.Requests {
				if r.Exactly == nil || s.classes[r.Exactly.DeviceClassName] != nil {
					continue
				}
				obj, err := v.Get(ctx, deviceClasses, "", r.Exactly.DeviceClassName)
				if err != nil {
					return fmt.Errorf("read DeviceClass %s: %w", r.Exactly.DeviceClassName, err)
				}
				if dc, err := view.As[resourcev1.DeviceClass](obj); err == nil && dc != nil {
					s.classes[dc.Name] = dc
				}
			}
		}
	}
	return nil
}

// migProfileOf is the MIG profile of the package the pod's claim asks
// for, "" when it is not a MIG package.
func (s *Snapshot) migProfileOf(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ResourceClaimStatuses {
		if cs.ResourceClaimName == nil {
			continue
		}
		c := s.claims[pod.Namespace][*cs.ResourceClaimName]
		if c == nil {
			continue
		}
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly == nil {
				continue
			}
			if dc := s.classes[r.Exactly.DeviceClassName]; dc != nil && dc.Annotations[contract.AnnotationSharing] == contract.SharingMIG {
				return dc.Annotations[contract.AnnotationMIGProfile]
			}
		}
	}
	return ""
}
