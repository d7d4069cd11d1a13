package render

import (
	"fmt"
	"maps"
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// The annotations of a package's DeviceClass, which the node plugin reads
// too: the admission policies name them here.
const (
	AnnotationGPUModel     = contract.AnnotationGPUModel
	AnnotationMemory       = contract.AnnotationMemory
	AnnotationFraction     = contract.AnnotationFraction
	AnnotationSharing      = contract.AnnotationSharing
	AnnotationComputeShare = contract.AnnotationComputeShare
	AnnotationReplicas     = contract.AnnotationReplicas
	AnnotationShares       = contract.AnnotationShares
	AnnotationMIGProfile   = contract.AnnotationMIGProfile
)

// Selector is the CEL expression of a fraction package's DeviceClass: it
// pins the driver, the GPU model and the slice fraction, and nothing else.
func Selector(model string, fraction int) string {
	attrs := fmt.Sprintf("device.attributes[%q]", contract.DriverName)
	return fmt.Sprintf("device.driver == %q && %s.%s == %q && %s.%s == %d",
		contract.DriverName, attrs, contract.AttrModel, model, attrs, contract.AttrFraction, fraction)
}

// SharedSelector is the CEL expression of an any-size or time-sliced
// package's DeviceClass: the driver, the GPU model and the GPU's device of
// that sharing. Devices of node plugins older than sharing lack the
// attribute; has() keeps them a mismatch rather than an error that would
// fail the whole allocation.
func SharedSelector(model, sharing string) string {
	attrs := fmt.Sprintf("device.attributes[%q]", contract.DriverName)
	return fmt.Sprintf("device.driver == %q && %s.%s == %q && has(%s.%s) && %s.%s == %q",
		contract.DriverName, attrs, contract.AttrModel, model, attrs, contract.AttrSharing, attrs, contract.AttrSharing, sharing)
}

// MIGSelector is the CEL expression of a MIG package's DeviceClass: the
// driver, the GPU model, MIG devices, and the profile. has() keeps devices
// without the attributes (partitions, older plugins) a mismatch.
func MIGSelector(model, profile string) string {
	attrs := fmt.Sprintf("device.attributes[%q]", contract.DriverName)
	return fmt.Sprintf("%s && has(%s.%s) && %s.%s == %q", SharedSelector(model, contract.SharingMIG),
		attrs, contract.AttrMIGProfile, attrs, contract.AttrMIGProfile, profile)
}

// PackageSelector is the CEL expression of the package's DeviceClass.
func PackageSelector(p *spec.Package) string {
	switch p.Kind() {
	case contract.SharingPartition:
		return Selector(p.GPUModel, p.Fraction)
	case contract.SharingMIG:
		return MIGSelector(p.GPUModel, p.MIGProfile)
	}
	return SharedSelector(p.GPUModel, p.Kind())
}

// CapacityRequests is what each claim of the package asks of the device it
// gets: an any-size slice's memory and compute, a time-sliced slice's
// shares; nothing for a fraction or a MIG instance, whose device is its
// size.
func CapacityRequests(p *spec.Package) map[resourcev1.QualifiedName]resource.Quantity {
	if p == nil {
		return nil // a package the stack does not know: validation says so
	}
	switch p.Kind() {
	case contract.SharingAnySize:
		return map[resourcev1.QualifiedName]resource.Quantity{
			contract.CapacityMemory:  *resource.NewQuantity(p.MemoryBytes, resource.BinarySI),
			contract.CapacityCompute: *resource.NewQuantity(int64(p.ComputeShare), resource.DecimalSI),
		}
	case contract.SharingTimeSliced:
		return map[resourcev1.QualifiedName]resource.Quantity{
			contract.CapacityShares: *resource.NewQuantity(p.Shares(), resource.DecimalSI),
		}
	}
	return nil
}

func (r renderer) pkg(p *spec.Package) ([]objects.Object, error) {
	dc := DeviceClass(p)
	meta := r.meta(p.Address, "", p.Name, dc.Labels)
	maps.Copy(meta.Annotations, dc.Annotations)
	dc.ObjectMeta = meta
	o := object(p.Address, dc, "resource.k8s.io/v1", "DeviceClass")
	return []objects.Object{o}, nil
}

// DeviceClass is the package's DeviceClass, without the stack's ownership:
// its selector, the label that makes it a package, and the annotations
// that say what one slice of it is (the node plugin holds every
// allocation to them).
func DeviceClass(p *spec.Package) *resourcev1.DeviceClass {
	labels := map[string]string{contract.LabelPackage: p.Name}
	annotations := map[string]string{contract.AnnotationGPUModel: p.GPUModel}
	switch p.Kind() {
	case contract.SharingPartition:
		labels[LabelFraction] = strconv.Itoa(p.Fraction)
		annotations[contract.AnnotationFraction] = strconv.Itoa(p.Fraction)
	case contract.SharingAnySize:
		annotations[contract.AnnotationSharing] = contract.SharingAnySize
		annotations[contract.AnnotationComputeShare] = strconv.Itoa(p.ComputeShare)
	case contract.SharingTimeSliced:
		annotations[contract.AnnotationSharing] = contract.SharingTimeSliced
		annotations[contract.AnnotationReplicas] = strconv.Itoa(p.Replicas)
		annotations[contract.AnnotationShares] = strconv.FormatInt(p.Shares(), 10)
	case contract.SharingMIG:
		annotations[contract.AnnotationSharing] = contract.SharingMIG
		annotations[contract.AnnotationMIGProfile] = p.MIGProfile
	}
	if p.Memory != "" {
		annotations[contract.AnnotationMemory] = p.Memory
	}
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: labels, Annotations: annotations},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: PackageSelector(p)},
		}}},
	}
	if p.ExtendedResourceName != "" {
		dc.Spec.ExtendedResourceName = &p.ExtendedResourceName
	}
	return dc
}

// PackageOf reads a package back from the DeviceClass pkg rendered: its
// name, GPU model, kind (and a MIG package's profile) and size, and
// extended resource name.
func PackageOf(dc *resourcev1.DeviceClass) (*spec.Package, error) {
	p := &spec.Package{Name: dc.Name, GPUModel: dc.Annotations[contract.AnnotationGPUModel], Memory: dc.Annotations[contract.AnnotationMemory]}
	number := func(key string) (int, error) {
		n, err := strconv.Atoi(dc.Annotations[key])
		if err != nil {
			return 0, fmt.Errorf("DeviceClass %s: annotation %s is %q, not a number; apply the package again", dc.Name, key, dc.Annotations[key])
		}
		return n, nil
	}
	var err error
	switch dc.Annotations[contract.AnnotationSharing] {
	case "":
		if p.Fraction, err = number(contract.AnnotationFraction); err != nil {
			return nil, err
		}
		p.ComputeShare = p.Fraction
	case contract.SharingAnySize:
		if p.ComputeShare, err = number(contract.AnnotationComputeShare); err != nil {
			return nil, err
		}
	case contract.SharingTimeSliced:
		p.Sharing = spec.SharingTimeSliced
		if p.Replicas, err = number(contract.AnnotationReplicas); err != nil {
			return nil, err
		}
		p.ComputeShare = contract.ComputeWhole
	case contract.SharingMIG:
		if p.MIGProfile = dc.Annotations[contract.AnnotationMIGProfile]; p.MIGProfile == "" {
			return nil, fmt.Errorf("DeviceClass %s: a MIG package's class without annotation %s; apply the package again", dc.Name, contract.AnnotationMIGProfile)
		}
	default:
		return nil, fmt.Errorf("DeviceClass %s: annotation %s is %q, which this gpuslice does not know; upgrade gpuslice or apply the package again", dc.Name, contract.AnnotationSharing, dc.Annotations[contract.AnnotationSharing])
	}
	if q, err := resource.ParseQuantity(p.Memory); err == nil {
		p.MemoryBytes = q.Value()
	}
	if dc.Spec.ExtendedResourceName != nil {
		p.ExtendedResourceName = *dc.Spec.ExtendedResourceName
	}
	return p, nil
}
