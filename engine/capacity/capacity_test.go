package capacity_test

import (
	"context"
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/capacity"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/internal/view/viewtest"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
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
		p := snap.Package(&spec.Package{Name: "p", GPUModel: model, Fraction: tc.fraction})
		if p.Published != tc.published || p.Allocated != tc.allocated || p.Free != tc.free {
			t.Errorf("%d %%: published %d allocated %d free %d; want %d %d %d", tc.fraction, p.Published, p.Allocated, p.Free, tc.published, tc.allocated, tc.free)
		}
		if len(p.Nodes) != 2 || p.Nodes[0].Free != tc.n1Free || p.Nodes[1].Free != tc.n2Free {
			t.Errorf("%d %%: per node %+v; want free %d on n1, %d on n2", tc.fraction, p.Nodes, tc.n1Free, tc.n2Free)
		}
	}
	if got := snap.Package(&spec.Package{Name: "p", GPUModel: "Tesla T4", Fraction: 25}); got.Published != 0 || got.Free != 0 {
		t.Errorf("another model: %+v", got)
	}
}

// published is node's GPUs as the node plugin publishes them (its own
// publish code), partitions, any-size and time-sliced devices together.
func published(node string, gpus int) []runtime.Object {
	var gs []discovery.GPU
	for i := range gpus {
		gs = append(gs, discovery.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", node, i), Name: model, MemoryBytes: 32 << 30, CCMajor: 7})
	}
	dr := publish.Build(node, gs, publish.Options{Fractions: contract.DefaultFractions, AnySize: true, TimeSliced: true})
	return sliceObjects(node, dr.Pools[node].Slices)
}

// sliceObjects are the ResourceSlices of node's pool as the resourceslice
// controller would write them.
func sliceObjects(node string, built []resourceslice.Slice) []runtime.Object {
	var out []runtime.Object
	for i, sl := range built {
		out = append(out, &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", node, i)},
			Spec: resourcev1.ResourceSliceSpec{Driver: contract.DriverName, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: int64(len(built))},
				SharedCounters: sl.SharedCounters, Devices: sl.Devices},
		})
	}
	return out
}

// shareClaim is a claim of class given a share of a shared device.
func shareClaim(name, node, device, class string, consumed map[string]string) *resourcev1.ResourceClaim {
	c := claim(name, node, device)
	c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: 1}}}
	r := &c.Status.Allocation.Devices.Results[0]
	r.ShareID = ptr.To(types.UID(name))
	r.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{}
	for k, v := range consumed {
		r.ConsumedCapacity[resourcev1.QualifiedName(k)] = resource.MustParse(v)
	}
	return c
}

// Any-size and time-sliced packages count what their GPUs' shared devices
// can still give: the memory and compute left beside the shares already
// allocated, and nothing on a GPU whose counters a partition or another
// kind's share holds (a GPU serves one kind at a time).
func TestFreeSharesOfAnySizeAndTimeSliced(t *testing.T) {
	small := &spec.Package{Name: "any-6gi", GPUModel: model, Memory: "6Gi", MemoryBytes: 6 << 30, ComputeShare: 20}
	large := &spec.Package{Name: "any-20gi", GPUModel: model, Memory: "20Gi", MemoryBytes: 20 << 30, ComputeShare: 60}
	shared := &spec.Package{Name: "ts-4", GPUModel: model, Sharing: spec.SharingTimeSliced, Replicas: 4}
	quarter := &spec.Package{Name: "q", GPUModel: model, Fraction: 25}
	objs := published("n1", 3)
	objs = append(objs,
		// GPU 0: two any-size shares, 26 GiB and 80 % of it
		shareClaim("a", "n1", "gpu-0-any-size", "any-6gi", map[string]string{"memory": "6Gi", "compute": "20"}),
		shareClaim("b", "n1", "gpu-0-any-size", "any-20gi", map[string]string{"memory": "20Gi", "compute": "60"}),
		// GPU 1: one time-sliced share of four
		shareClaim("c", "n1", "gpu-1-time-sliced", "ts-4", map[string]string{"shares": "250000"}),
		// GPU 2: a quarter partition
		claim("d", "n1", "gpu-2-25pct-1"),
	)
	snap, err := capacity.Load(context.Background(), viewOf(t, objs...))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pkg                        *spec.Package
		published, allocated, free int64
	}{
		// per empty GPU: min(32/6, 100/20) = 5; GPU 0 has 6 GiB and 20 % left: 1; GPUs 1 and 2 are held by other kinds
		{small, 15, 1, 1},
		// per empty GPU: min(32/20, 100/60) = 1; GPU 0 has no room
		{large, 3, 1, 0},
		// per GPU 4; GPU 1 has 3 left; GPUs 0 and 2 are held by other kinds
		{shared, 12, 1, 3},
		// GPU 2 has three quarters left; GPUs 0 and 1 are held by shares
		{quarter, 12, 1, 3},
	} {
		p := snap.Package(tc.pkg)
		if p.Published != tc.published || p.Allocated != tc.allocated || p.Free != tc.free || p.Sharing != tc.pkg.Kind() {
			t.Errorf("%s: %s published %d allocated %d free %d; want %d %d %d", tc.pkg.Name, p.Sharing, p.Published, p.Allocated, p.Free, tc.published, tc.allocated, tc.free)
		}
	}
}
