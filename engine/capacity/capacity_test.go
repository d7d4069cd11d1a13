package capacity_test

import (
	"context"
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/capacity"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/internal/view/viewtest"
)

func viewOf(t *testing.T, objs ...runtime.Object) *view.View {
	v, _ := viewtest.New(t, objs...)
	return v
}

const model = "Tesla V100-PCIE-32GB"

// gpu publishes one 32 GiB GPU on node as 25, 50 and 100 % devices sharing
// its counters (the acceptance tests publish the same on a real API server).
func gpu(node string) []runtime.Object {
	total := resource.MustParse("32Gi")
	pool := resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: resourcev1.ResourceSliceSpec{Driver: contract.DriverName, Pool: pool, NodeName: ptr.To(node),
			SharedCounters: []resourcev1.CounterSet{{Name: "gpu-0", Counters: map[string]resourcev1.Counter{
				contract.CapacityMemory: {Value: total}, contract.CapacityCompute: {Value: *resource.NewQuantity(100, resource.DecimalSI)},
			}}}},
	}
	for _, f := range []int64{25, 50, 100} {
		mem := resource.NewQuantity(total.Value()*f/100, resource.BinarySI)
		comp := resource.NewQuantity(f, resource.DecimalSI)
		for i := int64(1); i <= 100/f; i++ {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
				Name: fmt.Sprintf("gpu-0-%dpct-%d", f, i),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					contract.AttrModel: {StringValue: ptr.To(model)}, contract.AttrFraction: {IntValue: ptr.To(f)},
				},
				ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: map[string]resourcev1.Counter{
					contract.CapacityMemory: {Value: *mem}, contract.CapacityCompute: {Value: *comp},
				}}},
			})
		}
	}
	return []runtime.Object{s}
}

func claim(name, node, device string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: contract.DriverName, Pool: node, Device: device}},
		}}},
	}
}

// Free slices honour the GPU's shared counters: with half a GPU allocated,
// two quarters and one half are free, no whole GPU, however many devices
// are unallocated.
func TestFreeHonoursSharedCounters(t *testing.T) {
	objs := append(gpu("n1"), gpu("n2")...)
	objs = append(objs, claim("a", "n1", "gpu-0-50pct-1"), claim("b", "n2", "gpu-0-25pct-3"), claim("c", "n2", "gpu-0-25pct-4"))
	snap, err := capacity.Load(context.Background(), viewOf(t, objs...))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fraction                   int
		published, allocated, free int64
		n1Free, n2Free             int64
	}{
		{25, 8, 2, 4, 2, 2},
		{50, 4, 1, 2, 1, 1},
		{100, 2, 0, 0, 0, 0},
	} {
		p := snap.Package("p", model, tc.fraction)
		if p.Published != tc.published || p.Allocated != tc.allocated || p.Free != tc.free {
			t.Errorf("%d %%: published %d allocated %d free %d; want %d %d %d", tc.fraction, p.Published, p.Allocated, p.Free, tc.published, tc.allocated, tc.free)
		}
		if len(p.Nodes) != 2 || p.Nodes[0].Free != tc.n1Free || p.Nodes[1].Free != tc.n2Free {
			t.Errorf("%d %%: per node %+v; want free %d on n1, %d on n2", tc.fraction, p.Nodes, tc.n1Free, tc.n2Free)
		}
	}
	if got := snap.Package("p", "Tesla T4", 25); got.Published != 0 || got.Free != 0 {
		t.Errorf("another model: %+v", got)
	}
}
