// Package publish turns discovered GPUs into the ResourceSlices the node
// plugin publishes: per GPU one slice holding a CounterSet (its memory and
// 100 % compute) and one slice of its devices, all consuming those
// counters, so the scheduler never places more than the GPU on it. What a
// GPU offers is chosen by Options: partitions (100/fraction devices for
// each fraction), an any-size device that claims ask amounts of memory and
// compute from (DRA consumable capacity), and a time-sliced device that
// several claims share whole. A device allocated many times charges the
// counters in full at its first share, so a GPU serves one kind at a time.
// A GPU in MIG mode offers only its MIG instances (mig.go), whatever the
// Options say: the hardware partitions it, software never does.
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

// Options say what every GPU of the node offers.
type Options struct {
	// Fractions are the partitions, in percent (each divides 100); none
	// publishes no partitions.
	Fractions []int
	// AnySize publishes one any-size device per GPU.
	AnySize bool
	// TimeSliced publishes one time-sliced device per GPU.
	TimeSliced bool
}

// Validate says what is wrong with the options for the node's GPUs, naming
// the flags. Options that offer nothing suit a node whose GPUs are all in
// MIG mode (they offer their instances whatever the options say), and no
// other.
func (o Options) Validate(gpus []discovery.GPU) error {
	if len(o.Fractions) > 0 || o.AnySize || o.TimeSliced {
		return nil
	}
	for _, g := range gpus {
		if !g.MIGEnabled {
			return fmt.Errorf("GPU %d (%s) is not in MIG mode and the options offer nothing for it: give --fractions, or turn on --any-size or --time-slicing", g.Index, g.Name)
		}
	}
	return nil
}

// Device is what the plugin knows about one published device: the GPU it
// shares and how. Prepare looks devices up by name.
type Device struct {
	Name    string
	GPU     discovery.GPU
	Sharing string // contract.Sharing*
	// Fraction and MemoryBytes are a partition's size; a shared device
	// has Fraction 0 and the whole GPU's memory (what its claims share).
	Fraction    int
	MemoryBytes uint64
	// MIG is a MIG device's instance (Sharing is contract.SharingMIG); its
	// MemoryBytes are the instance's.
	MIG *discovery.MIGDevice
}

// Shared reports whether the device is allocated to several claims at
// once (each allocation a share with its own ID).
func (d Device) Shared() bool {
	return d.Sharing == contract.SharingAnySize || d.Sharing == contract.SharingTimeSliced
}

// DeviceName is the readable name of the n-th (from 1) slice of a fraction
// on a GPU, e.g. gpu-0-25pct-1.
func DeviceName(gpuIndex, fraction, n int) string {
	return fmt.Sprintf("gpu-%d-%dpct-%d", gpuIndex, fraction, n)
}

// SharedDeviceName is the name of a GPU's any-size or time-sliced device,
// e.g. gpu-0-any-size.
func SharedDeviceName(gpuIndex int, sharing string) string {
	return fmt.Sprintf("gpu-%d-%s", gpuIndex, sharing)
}

// CounterSetName is the name of a GPU's counter set.
func CounterSetName(gpuIndex int) string { return contract.CounterSetPrefix + strconv.Itoa(gpuIndex) }

// ParseFractions reads a comma-separated list of percentages, each dividing
// 100 (so a GPU splits into whole slices), e.g. "25,50,100". An empty
// string is no partitions.
func ParseFractions(s string) ([]int, error) {
	var out []int
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
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
func Devices(gpus []discovery.GPU, o Options) []Device {
	var out []Device
	for _, g := range gpus {
		out = append(out, gpuDevices(g, o)...)
	}
	return out
}

func gpuDevices(g discovery.GPU, o Options) []Device {
	if g.MIGEnabled {
		return migDevices(g)
	}
	var out []Device
	for _, f := range o.Fractions {
		for n := 1; n <= 100/f; n++ {
			out = append(out, Device{Name: DeviceName(g.Index, f, n), GPU: g, Sharing: contract.SharingPartition, Fraction: f, MemoryBytes: g.MemoryBytes * uint64(f) / 100})
		}
	}
	for _, sh := range []struct {
		on      bool
		sharing string
	}{{o.AnySize, contract.SharingAnySize}, {o.TimeSliced, contract.SharingTimeSliced}} {
		if sh.on {
			out = append(out, Device{Name: SharedDeviceName(g.Index, sh.sharing), GPU: g, Sharing: sh.sharing, MemoryBytes: g.MemoryBytes})
		}
	}
	return out
}

// Taints are taints by GPU UUID: every device cut from the GPU (partition,
// any-size, time-sliced or MIG) carries them, so a failing GPU takes no new
// slice whatever its kind.
type Taints map[string][]resourcev1.DeviceTaint

// Build returns the driver resources of a node: one pool named after the
// node, and per GPU a counter slice followed by its device slice.
func Build(nodeName string, gpus []discovery.GPU, o Options) resourceslice.DriverResources {
	return BuildTainted(nodeName, gpus, o, nil)
}

// BuildTainted is Build with the taints of the node's GPUs.
func BuildTainted(nodeName string, gpus []discovery.GPU, o Options, taints Taints) resourceslice.DriverResources {
	pool := resourceslice.Pool{}
	for _, g := range gpus {
		if g.MIGEnabled && len(g.MIG) == 0 {
			continue // in MIG mode without instances: nothing to offer
		}
		pool.Slices = append(pool.Slices, resourceslice.Slice{SharedCounters: []resourcev1.CounterSet{{
			Name:     CounterSetName(g.Index),
			Counters: counters(int64(g.MemoryBytes), contract.ComputeWhole),
		}}})
		var ds []resourcev1.Device
		for _, d := range gpuDevices(g, o) {
			dev := apiDevice(d)
			dev.Taints = slices.Clone(taints[g.UUID])
			ds = append(ds, dev)
		}
		pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: ds})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: pool}}
}

func counters(memory, compute int64) map[string]resourcev1.Counter {
	return map[string]resourcev1.Counter{
		contract.CapacityMemory:  {Value: *resource.NewQuantity(memory, resource.BinarySI)},
		contract.CapacityCompute: {Value: *resource.NewQuantity(compute, resource.DecimalSI)},
	}
}

func apiDevice(d Device) resourcev1.Device {
	if d.Sharing == contract.SharingMIG {
		return migAPIDevice(d)
	}
	g := d.GPU
	isolation := contract.IsolationSoftware
	if d.Sharing == contract.SharingTimeSliced {
		isolation = contract.IsolationNone
	}
	dev := resourcev1.Device{Name: d.Name, Attributes: gpuAttributes(d, isolation)}
	switch d.Sharing {
	case contract.SharingPartition:
		memory := int64(d.MemoryBytes)
		dev.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			contract.CapacityMemory:  {Value: *resource.NewQuantity(memory, resource.BinarySI)},
			contract.CapacityCompute: {Value: *resource.NewQuantity(int64(d.Fraction), resource.DecimalSI)},
		}
		dev.ConsumesCounters = consumes(g, counters(memory, int64(d.Fraction)))
	case contract.SharingAnySize:
		// A claim asks for memory in steps and compute in percent; one
		// that asks for neither gets the least of each, never the GPU.
		memory := alignDown(int64(g.MemoryBytes), contract.MemoryStep)
		dev.AllowMultipleAllocations = ptr.To(true)
		dev.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			contract.CapacityMemory: {Value: *resource.NewQuantity(memory, resource.BinarySI), RequestPolicy: rangePolicy(contract.MemoryStep, memory, contract.MemoryStep, resource.BinarySI)},
			contract.CapacityCompute: {Value: *resource.NewQuantity(contract.ComputeWhole, resource.DecimalSI),
				RequestPolicy: rangePolicy(1, contract.ComputeWhole, 1, resource.DecimalSI)},
		}
		dev.ConsumesCounters = consumes(g, counters(int64(g.MemoryBytes), contract.ComputeWhole))
	case contract.SharingTimeSliced:
		// A claim that asks for no shares takes them all: the GPU alone.
		dev.AllowMultipleAllocations = ptr.To(true)
		shares := *resource.NewQuantity(contract.TimeSliceShares, resource.DecimalSI)
		dev.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			contract.CapacityShares: {Value: shares, RequestPolicy: &resourcev1.CapacityRequestPolicy{
				Default:    ptr.To(shares),
				ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: resource.NewQuantity(1, resource.DecimalSI), Max: ptr.To(shares)},
			}},
		}
		dev.ConsumesCounters = consumes(g, counters(int64(g.MemoryBytes), contract.ComputeWhole))
	}
	return dev
}

// gpuAttributes are the attributes every device has: its GPU's, and how it
// shares it.
func gpuAttributes(d Device, isolation string) map[resourcev1.QualifiedName]resourcev1.DeviceAttribute {
	g := d.GPU
	attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		contract.AttrModel:             {StringValue: ptr.To(g.Name)},
		contract.AttrUUID:              {StringValue: ptr.To(g.UUID)},
		contract.AttrIndex:             {IntValue: ptr.To(int64(g.Index))},
		contract.AttrComputeCapability: {VersionValue: ptr.To(g.ComputeCapability())},
		contract.AttrArchitecture:      {StringValue: ptr.To(g.Architecture)},
		contract.AttrDriverVersion:     {StringValue: ptr.To(g.DriverVersion)},
		// Every device has a fraction, 0 when shared: the selectors of
		// partition packages read it, and a missing attribute would be a
		// CEL error that fails the whole claim's allocation.
		contract.AttrFraction:  {IntValue: ptr.To(int64(d.Fraction))},
		contract.AttrPCIBusID:  {StringValue: ptr.To(g.PCIBusID)},
		contract.AttrSharing:   {StringValue: ptr.To(d.Sharing)},
		contract.AttrIsolation: {StringValue: ptr.To(isolation)},
	}
	if g.CUDADriverVersion != "" {
		attrs[contract.AttrCUDADriverVersion] = resourcev1.DeviceAttribute{VersionValue: ptr.To(g.CUDADriverVersion + ".0")}
	}
	if g.MemorySource != "" {
		// says whether the counter set's memory is what allocations can
		// get (v2) or includes what the driver reserves (v1)
		attrs[contract.AttrMemorySource] = resourcev1.DeviceAttribute{StringValue: ptr.To(g.MemorySource)}
	}
	return attrs
}

func consumes(g discovery.GPU, c map[string]resourcev1.Counter) []resourcev1.DeviceCounterConsumption {
	return []resourcev1.DeviceCounterConsumption{{CounterSet: CounterSetName(g.Index), Counters: c}}
}

// rangePolicy lets a claim ask for min to max in steps; one that asks for
// nothing gets min.
func rangePolicy(min, max, step int64, format resource.Format) *resourcev1.CapacityRequestPolicy {
	return &resourcev1.CapacityRequestPolicy{
		Default: resource.NewQuantity(min, format),
		ValidRange: &resourcev1.CapacityRequestPolicyRange{
			Min: resource.NewQuantity(min, format), Max: resource.NewQuantity(max, format), Step: resource.NewQuantity(step, format),
		},
	}
}

func alignDown(v, step int64) int64 { return v / step * step }
