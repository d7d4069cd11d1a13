package driver

import (
	"fmt"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/contract"
)

// slicePackage is one slice of a gpuslice package as its DeviceClass's
// annotations describe it: what prepare holds each allocation to. The
// engine writes the annotations; the plugin reads them with this parser of
// its own, knowing the engine only through contract.
type slicePackage struct {
	class string
	model string
	kind  string // contract.Sharing*
	// a partition's percent of the GPU
	fraction int
	// an any-size slice's memory and compute
	memory  int64
	compute int
	// a time-sliced slice's shares of its GPU, one of replicas
	replicas int
	shares   int64
	// a MIG instance's profile
	migProfile string
}

// errNotAPackage is packageOf's answer for a DeviceClass gpuslice did not
// render as a package.
type errNotAPackage struct{ class string }

func (e errNotAPackage) Error() string {
	return fmt.Sprintf("DeviceClass %s is not a gpuslice package: it has no %s label", e.class, contract.LabelPackage)
}

// packageOf reads the slice of the package dc is the class of.
func packageOf(dc *resourceapi.DeviceClass) (slicePackage, error) {
	if dc.Labels[contract.LabelPackage] == "" {
		return slicePackage{}, errNotAPackage{dc.Name}
	}
	p := slicePackage{class: dc.Name, model: dc.Annotations[contract.AnnotationGPUModel], kind: dc.Annotations[contract.AnnotationSharing]}
	broken := func(key, want string) error {
		return fmt.Errorf("package DeviceClass %s: annotation %s is %q, not %s; the platform team must apply the package again", dc.Name, key, dc.Annotations[key], want)
	}
	number := func(key string, lo, hi int) (int, error) {
		n, err := strconv.Atoi(dc.Annotations[key])
		if err != nil || n < lo || n > hi {
			return 0, broken(key, fmt.Sprintf("a number from %d to %d", lo, hi))
		}
		return n, nil
	}
	if p.model == "" {
		return p, broken(contract.AnnotationGPUModel, "a GPU model")
	}
	var err error
	switch p.kind {
	case "":
		p.kind = contract.SharingPartition
		p.fraction, err = number(contract.AnnotationFraction, 1, contract.ComputeWhole)
	case contract.SharingAnySize:
		q, qerr := resource.ParseQuantity(dc.Annotations[contract.AnnotationMemory])
		if qerr != nil || q.Value() <= 0 {
			return p, broken(contract.AnnotationMemory, "an amount of memory")
		}
		p.memory = q.Value()
		p.compute, err = number(contract.AnnotationComputeShare, 1, contract.ComputeWhole)
	case contract.SharingTimeSliced:
		if p.replicas, err = number(contract.AnnotationReplicas, 1, contract.MaxTimeSliceReplicas); err != nil {
			return p, err
		}
		p.shares = contract.SharesOf(p.replicas)
		if s, ok := dc.Annotations[contract.AnnotationShares]; ok && s != strconv.FormatInt(p.shares, 10) {
			return p, broken(contract.AnnotationShares, fmt.Sprintf("%d (the shares of one of %d replicas)", p.shares, p.replicas))
		}
	case contract.SharingMIG:
		if p.migProfile = dc.Annotations[contract.AnnotationMIGProfile]; p.migProfile == "" {
			return p, broken(contract.AnnotationMIGProfile, "a MIG profile")
		}
	default:
		return p, fmt.Errorf("package DeviceClass %s: annotation %s is %q, which this node plugin does not know; upgrade gpuslice-nodeplugin", dc.Name, contract.AnnotationSharing, p.kind)
	}
	return p, err
}

// String says what one slice of the package is.
func (p slicePackage) String() string {
	switch p.kind {
	case contract.SharingPartition:
		if p.fraction == contract.ComputeWhole {
			return "a whole " + p.model
		}
		return fmt.Sprintf("a %d%% slice of a %s", p.fraction, p.model)
	case contract.SharingAnySize:
		return fmt.Sprintf("%s of memory and %d%% compute of a %s", bytesString(p.memory), p.compute, p.model)
	case contract.SharingTimeSliced:
		return fmt.Sprintf("%d shares of a time-sliced %s (one of %d per GPU)", p.shares, p.model, p.replicas)
	}
	return fmt.Sprintf("one MIG %s instance of a %s", p.migProfile, p.model)
}

func bytesString(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
