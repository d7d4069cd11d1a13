// Package publish turns discovered GPUs into the ResourceSlices the node
// plugin publishes: per GPU one slice holding a CounterSet (its memory and
// 100 % compute) and one slice of partitionable devices, 100/fraction of
// them for each offered fraction, each consuming its share of the counters.
// The scheduler then never places slices adding up to more than the GPU.
package publish

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
)

// Device is what the plugin knows about one published device: the GPU it
// slices and the slice's size. Prepare looks devices up by name.
type Device struct {
	Name        string
	GPU         discovery.GPU
	Fraction    int
	MemoryBytes uint64
}

// DeviceName is the readable name of the n-th (from 1) slice of a fraction
// on a GPU, e.g. gpu-0-25pct-1.
func DeviceName(gpuIndex, fraction, n int) string {
	return fmt.Sprintf("gpu-%d-%dpct-%d", gpuIndex, fraction, n)
}

// CounterSetName is the name of a GPU's counter set.
func CounterSetName(gpuIndex int) string { return contract.CounterSetPrefix + strconv.Itoa(gpuIndex) }

// ParseFractions reads a comma-separated list of percentages, each dividing
// 100 (so a GPU splits into whole slices), e.g. "25,50,100".
func ParseFractions(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		f, err := strconv.Atoi(strings.TrimSuffix(part, "%"))
		if err != nil || f < 1 || f > 100 || 100%f != 0 {
			return nil, fmt.Errorf("fraction %q: want a percentage that divides 100 (1, 2, 4, 5, 10, 20, 25, 50 or 100), e.g. --fractions 25,50,100", part)
		}
		if slices.Contains(out, f) {
			return nil, fmt.Errorf("fraction %d%% is listed twice in %q", f, s)
		}
		out = append(out, f)
	}
	slices.Sort(out)
	return out, nil
}

// Devices lists every device the plugin offers on gpus, in publishing order.
func Devices(gpus []discovery.GPU, fractions []int) []Device {
	var out []Device
	for _, g := range gpus {
		for _, f := range fractions {
			for n := 1; n <= 100/f; n++ {
				out = append(out, Device{Name: DeviceName(g.Index, f, n), GPU: g, Fraction: f, MemoryBytes: g.MemoryBytes * uint64(f) / 100})
			}
		}
	}
	return out
}

// Build returns the driver resources of a node: one pool named after the
// node, and per GPU a counter slice followed by its device slice.
func Build(nodeName string, gpus []discovery.GPU, fractions []int) resourceslice.DriverResources {
	pool := resourceslice.Pool{}
	devices := Devices(gpus, fractions)
	for _, g := range gpus {
		pool.Slices = append(pool.Slices, resourceslice.Slice{SharedCounters: []resourcev1.CounterSet{{
			Name: CounterSetName(g.Index),
			Counters: map[string]resourcev1.Counter{
				contract.CapacityMemory:  {Value: *resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)},
				contract.CapacityCompute: {Value: *resource.NewQuantity(contract.ComputeWhole, resource.DecimalSI)},
			},
		}}})
		var ds []resourcev1.Device
		for _, d := range devices {
			if d.GPU.Index == g.Index {
				ds = append(ds, apiDevice(d))
			}
		}
		pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: ds})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: pool}}
}

func apiDevice(d Device) resourcev1.Device {
	g := d.GPU
	memory := *resource.NewQuantity(int64(d.MemoryBytes), resource.BinarySI)
	compute := *resource.NewQuantity(int64(d.Fraction), resource.DecimalSI)
	attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		contract.AttrModel:             {StringValue: ptr.To(g.Name)},
		contract.AttrUUID:              {StringValue: ptr.To(g.UUID)},
		contract.AttrIndex:             {IntValue: ptr.To(int64(g.Index))},
		contract.AttrComputeCapability: {VersionValue: ptr.To(g.ComputeCapability())},
		contract.AttrArchitecture:      {StringValue: ptr.To(g.Architecture)},
		contract.AttrDriverVersion:     {StringValue: ptr.To(g.DriverVersion)},
		contract.AttrFraction:          {IntValue: ptr.To(int64(d.Fraction))},
		contract.AttrPCIBusID:          {StringValue: ptr.To(g.PCIBusID)},
	}
	if g.CUDADriverVersion != "" {
		attrs[contract.AttrCUDADriverVersion] = resourcev1.DeviceAttribute{VersionValue: ptr.To(g.CUDADriverVersion + ".0")}
	}
	return resourcev1.Device{
		Name:       d.Name,
		Attributes: attrs,
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			contract.CapacityMemory: {Value: memory}, contract.CapacityCompute: {Value: compute},
		},
		ConsumesCounters: []resourcev1.DeviceCounterConsumption{{
			CounterSet: CounterSetName(g.Index),
			Counters: map[string]resourcev1.Counter{
				contract.CapacityMemory: {Value: memory}, contract.CapacityCompute: {Value: compute},
			},
		}},
	}
}
