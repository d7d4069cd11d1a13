package simnode

import (
	"context"
	"fmt"
	"slices"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/cluster"
)

// MIGInstance is one MIG instance of a simulated GPU in MIG mode.
type MIGInstance struct {
	GPUIndex   int
	Model      string // the parent GPU's NVML name
	ParentUUID string
	UUID       string // "MIG-…"
	Profile    string // e.g. "1g.5gb"
	Placement  int
	MemoryMiB  int64
}

// MIGDevice is the DRA device of a MIG instance with the attributes and
// capacity the contract names (contract.SharingMIG): one allocation at a
// time, consuming no counters. It stands in for the node plugin's own
// publisher of MIG devices, which engine tests do not depend on.
func MIGDevice(m MIGInstance) resourcev1.Device {
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: ptr.To(s)} }
	num := func(n int) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{IntValue: ptr.To(int64(n))} }
	return resourcev1.Device{
		Name: contract.MIGDeviceName(m.GPUIndex, m.Profile, m.Placement),
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			contract.AttrModel: str(m.Model), contract.AttrUUID: str(m.UUID), contract.AttrParentUUID: str(m.ParentUUID),
			contract.AttrIndex: num(m.GPUIndex), contract.AttrFraction: num(0),
			contract.AttrSharing: str(contract.SharingMIG), contract.AttrIsolation: str(contract.IsolationHardware),
			contract.AttrMIGProfile: str(m.Profile), contract.AttrMIGPlacement: num(m.Placement),
		},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			contract.CapacityMemory: {Value: *resource.NewQuantity(m.MemoryMiB<<20, resource.BinarySI)},
		},
	}
}

// StartMIG registers a Ready node on c named name publishing the given MIG
// instances (one GPU per distinct ParentUUID, all in MIG mode), without
// waiting for the slices (Published waits).
func StartMIG(ctx context.Context, c *cluster.Cluster, name string, instances []MIGInstance) (*Node, error) {
	n, err := c.AddNode(ctx, cluster.NodeSpec{Name: name})
	if err != nil {
		return nil, err
	}
	devices := make([]resourcev1.Device, len(instances))
	for i, m := range instances {
		devices[i] = MIGDevice(m)
	}
	resources := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		name: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: contract.DriverName, KubeClient: c.Client(),
		Owner:     &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: name, UID: n.UID},
		Resources: &resources,
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: publish: %w", name, err)
	}
	node := &Node{Name: name, ctrl: ctrl}
	for _, d := range devices {
		node.Devices = append(node.Devices, d.Name)
	}
	slices.Sort(node.Devices)
	return node, nil
}

// A100MIG is n instances of profile (memoryMiB each) on GPU index of an
// NVIDIA A100-SXM4-40GB in MIG mode, at placements 0, size, 2·size, …
// (size: the profile's compute slices).
func A100MIG(node string, index, n int, profile string, size int, memoryMiB int64) []MIGInstance {
	parent := fmt.Sprintf("GPU-%s-%d", node, index)
	out := make([]MIGInstance, n)
	for i := range out {
		out[i] = MIGInstance{GPUIndex: index, Model: "NVIDIA A100-SXM4-40GB", ParentUUID: parent,
			UUID: fmt.Sprintf("MIG-%s-%d-%d", node, index, i), Profile: profile, Placement: i * size, MemoryMiB: memoryMiB}
	}
	return out
}
