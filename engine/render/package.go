package render

import (
	"fmt"
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Annotations on a package's DeviceClass, so people and plan-time checks
// can read the slice size without the configuration.
const (
	AnnotationGPUModel = "gpuslice.dev/gpu-model"
	AnnotationMemory   = "gpuslice.dev/memory"
	AnnotationFraction = "gpuslice.dev/fraction"
)

// Selector is the CEL expression of a package's DeviceClass: it pins the
// driver, the GPU model and the slice fraction, and nothing else.
func Selector(model string, fraction int) string {
	attrs := fmt.Sprintf("device.attributes[%q]", contract.DriverName)
	return fmt.Sprintf("device.driver == %q && %s.%s == %q && %s.%s == %d",
		contract.DriverName, attrs, contract.AttrModel, model, attrs, contract.AttrFraction, fraction)
}

func (r renderer) pkg(p *spec.Package) ([]objects.Object, error) {
	meta := r.meta(p.Address, "", p.Name, map[string]string{contract.LabelPackage: p.Name, LabelFraction: strconv.Itoa(p.Fraction)})
	meta.Annotations[AnnotationGPUModel] = p.GPUModel
	meta.Annotations[AnnotationFraction] = strconv.Itoa(p.Fraction)
	if p.Memory != "" {
		meta.Annotations[AnnotationMemory] = p.Memory
	}
	dc := &resourcev1.DeviceClass{
		ObjectMeta: meta,
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: Selector(p.GPUModel, p.Fraction)},
		}}},
	}
	if p.ExtendedResourceName != "" {
		dc.Spec.ExtendedResourceName = &p.ExtendedResourceName
	}
	o, err := object(p.Address, dc, "resource.k8s.io/v1", "DeviceClass")
	if err != nil {
		return nil, err
	}
	return []objects.Object{o}, nil
}

// PackageOf reads a package back from the DeviceClass pkg rendered: its
// name, GPU model, fraction, slice memory and extended resource name.
func PackageOf(dc *resourcev1.DeviceClass) (*spec.Package, error) {
	p := &spec.Package{Name: dc.Name, GPUModel: dc.Annotations[AnnotationGPUModel], Memory: dc.Annotations[AnnotationMemory]}
	var err error
	if p.Fraction, err = strconv.Atoi(dc.Annotations[AnnotationFraction]); err != nil {
		return nil, fmt.Errorf("DeviceClass %s: annotation %s is %q, not a number; apply the package again", dc.Name, AnnotationFraction, dc.Annotations[AnnotationFraction])
	}
	if q, err := resource.ParseQuantity(p.Memory); err == nil {
		p.MemoryBytes = q.Value()
	}
	if dc.Spec.ExtendedResourceName != nil {
		p.ExtendedResourceName = *dc.Spec.ExtendedResourceName
	}
	return p, nil
}
