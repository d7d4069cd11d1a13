package provider_test

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
)

// simulatedGPU is a GPU published the way the node plugin does: a counter
// set per GPU and 25, 50 and 100 % devices consuming it.
type simulatedGPU struct {
	node, model, uuid, cc, arch, driver string
	memory                              string
	// memorySource is the devices' contract.AttrMemorySource; "" publishes
	// none, as node plugins older than the attribute do.
	memorySource string
	// taints are on every device, as a node plugin publishes an unhealthy
	// GPU's.
	taints []resourcev1.DeviceTaint
}

func (g simulatedGPU) publish(ctx context.Context) error {
	pool := resourcev1.ResourcePool{Name: g.node, ResourceSliceCount: 2}
	total := resource.MustParse(g.memory)
	counters := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: g.node + "-counters"},
		Spec: resourcev1.ResourceSliceSpec{Driver: contract.DriverName, Pool: pool, NodeName: ptr.To(g.node),
			SharedCounters: []resourcev1.CounterSet{{Name: "gpu-0", Counters: map[string]resourcev1.Counter{
				contract.CapacityMemory: {Value: total}, contract.CapacityCompute: {Value: *resource.NewQuantity(contract.ComputeWhole, resource.DecimalSI)},
			}}}},
	}
	devices := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: g.node + "-devices"},
		Spec:       resourcev1.ResourceSliceSpec{Driver: contract.DriverName, Pool: pool, NodeName: ptr.To(g.node)},
	}
	for _, f := range []int64{25, 50, 100} {
		memory := resource.NewQuantity(total.Value()*f/100, resource.BinarySI)
		compute := resource.NewQuantity(f, resource.DecimalSI)
		for i := int64(1); i <= 100/f; i++ {
			attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				contract.AttrModel: {StringValue: ptr.To(g.model)}, contract.AttrUUID: {StringValue: ptr.To(g.uuid)},
				contract.AttrIndex: {IntValue: ptr.To[int64](0)}, contract.AttrComputeCapability: {VersionValue: ptr.To(g.cc)},
				contract.AttrArchitecture: {StringValue: ptr.To(g.arch)}, contract.AttrDriverVersion: {StringValue: ptr.To(g.driver)},
				contract.AttrFraction: {IntValue: ptr.To(f)},
			}
			if g.memorySource != "" {
				attrs[contract.AttrMemorySource] = resourcev1.DeviceAttribute{StringValue: ptr.To(g.memorySource)}
			}
			devices.Spec.Devices = append(devices.Spec.Devices, resourcev1.Device{
				Name:       fmt.Sprintf("gpu-0-%dpct-%d", f, i),
				Attributes: attrs,
				Taints:     g.taints,
				Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{contract.CapacityMemory: {Value: *memory}, contract.CapacityCompute: {Value: *compute}},
				ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourcev1.Counter{
					contract.CapacityMemory: {Value: *memory}, contract.CapacityCompute: {Value: *compute},
				}}},
			})
		}
	}
	for _, s := range []*resourcev1.ResourceSlice{counters, devices} {
		if _, err := kube.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("publish %s: %w", s.Name, err)
		}
	}
	return nil
}

func v100(node string) simulatedGPU {
	return simulatedGPU{node: node, model: "Tesla V100-PCIE-32GB", uuid: "GPU-" + node, cc: "7.0.0", arch: "Volta", driver: "580.95.05", memory: "32Gi"}
}
