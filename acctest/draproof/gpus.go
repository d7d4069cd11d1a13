package draproof

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
)

// PublishGPUs publishes gpus partitionable GPUs of the proof's model on its
// node as the node plugin does: one CounterSet per GPU (gpu-<i>) holding its
// memory and compute in one ResourceSlice, and in a second slice, for each
// GPU and fraction, 100/fraction devices gpu-<i>-<fraction>pct-<n>
// consuming their share of that GPU's counters.
func (p *Proof) PublishGPUs(ctx context.Context, gpus int, fractions ...int) ([]*resourcev1.ResourceSlice, error) {
	pool := resourcev1.ResourcePool{Name: p.Node, Generation: 1, ResourceSliceCount: 2}
	total := resource.MustParse(GPUMemory)
	counters := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: p.Node + "-counters"},
		Spec:       resourcev1.ResourceSliceSpec{Driver: contract.DriverName, Pool: pool, NodeName: ptr.To(p.Node)},
	}
	devices := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: p.Node + "-devices"},
		Spec:       resourcev1.ResourceSliceSpec{Driver: contract.DriverName, Pool: pool, NodeName: ptr.To(p.Node)},
	}
	for g := range gpus {
		counterSet := fmt.Sprintf("gpu-%d", g)
		counters.Spec.SharedCounters = append(counters.Spec.SharedCounters, resourcev1.CounterSet{Name: counterSet, Counters: map[string]resourcev1.Counter{
			contract.CapacityMemory:  {Value: total},
			contract.CapacityCompute: {Value: *resource.NewQuantity(contract.ComputeWhole, resource.DecimalSI)},
		}})
		for _, f := range fractions {
			memory := resource.NewQuantity(total.Value()*int64(f)/100, resource.BinarySI)
			compute := resource.NewQuantity(int64(f), resource.DecimalSI)
			for i := 1; i <= 100/f; i++ {
				devices.Spec.Devices = append(devices.Spec.Devices, resourcev1.Device{
					Name: fmt.Sprintf("%s-%dpct-%d", counterSet, f, i),
					Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
						contract.AttrModel:    {StringValue: ptr.To(p.model())},
						contract.AttrFraction: {IntValue: ptr.To(int64(f))},
						// Every V100 is Volta.
						contract.AttrComputeCapability: {VersionValue: ptr.To("7.0.0")},
					},
					Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
						contract.CapacityMemory: {Value: *memory}, contract.CapacityCompute: {Value: *compute},
					},
					ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: counterSet, Counters: map[string]resourcev1.Counter{
						contract.CapacityMemory: {Value: *memory}, contract.CapacityCompute: {Value: *compute},
					}}},
				})
			}
		}
	}
	var out []*resourcev1.ResourceSlice
	for _, s := range []*resourcev1.ResourceSlice{counters, devices} {
		created, err := p.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("publish resource slice %s: %w", s.Name, err)
		}
		out = append(out, created)
	}
	return out, nil
}
