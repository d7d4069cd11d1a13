package publish

import (
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
)

// migDevices are a GPU's MIG instances, one device each, named by their
// profile and placement so the names survive restarts.
func migDevices(g discovery.GPU) []Device {
	out := make([]Device, 0, len(g.MIG))
	for i := range g.MIG {
		m := &g.MIG[i]
		out = append(out, Device{
			Name: contract.MIGDeviceName(g.Index, m.Profile, m.Placement), GPU: g, Sharing: contract.SharingMIG,
			MemoryBytes: m.MemoryBytes, MIG: m,
		})
	}
	return out
}

// migAPIDevice is a MIG instance as the scheduler sees it: its parent's
// attributes with its own UUID, its profile, parent and placement, and its
// memory. It consumes its memory from the GPU's counter set, like every
// device of the GPU, though the instances' placements already keep them
// within the GPU.
func migAPIDevice(d Device) resourcev1.Device {
	attrs := gpuAttributes(d, contract.IsolationHardware)
	attrs[contract.AttrUUID] = resourcev1.DeviceAttribute{StringValue: ptr.To(d.MIG.UUID)}
	attrs[contract.AttrParentUUID] = resourcev1.DeviceAttribute{StringValue: ptr.To(d.GPU.UUID)}
	attrs[contract.AttrMIGProfile] = resourcev1.DeviceAttribute{StringValue: ptr.To(d.MIG.Profile)}
	attrs[contract.AttrMIGPlacement] = resourcev1.DeviceAttribute{IntValue: ptr.To(int64(d.MIG.Placement))}
	memory := *resource.NewQuantity(int64(d.MemoryBytes), resource.BinarySI)
	return resourcev1.Device{
		Name:       d.Name,
		Attributes: attrs,
		Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{contract.CapacityMemory: {Value: memory}},
		ConsumesCounters: consumes(d.GPU, map[string]resourcev1.Counter{
			contract.CapacityMemory: {Value: memory},
		}),
	}
}
