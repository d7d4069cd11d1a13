package capacity_test

import (
	"context"
	"slices"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/capacity"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/simnode"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
)

// migNode publishes node's A100 GPU 0 in MIG mode: seven 1g.5gb
// instances, or two 3g.20gb on GPU 1.
func migNode(node string, instances ...[]simnode.MIGInstance) runtime.Object {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-mig"},
		Spec:       resourcev1.ResourceSliceSpec{Driver: contract.DriverName, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	for _, is := range instances {
		for _, m := range is {
			s.Spec.Devices = append(s.Spec.Devices, simnode.MIGDevice(m))
		}
	}
	return s
}

// A MIG package counts the instances of its profile and model: one per
// slice, allocated or free, per node; its kind and isolation say MIG and
// hardware. A GPU in MIG mode is one GPU (its parent UUID), not one per
// instance, and a MIG instance does not make the V100s' any-size devices
// look stripped of multiple allocations.
func TestMIGPackageCounts(t *testing.T) {
	objs := []runtime.Object{
		migNode("a1", simnode.A100MIG("a1", 0, 7, "1g.5gb", 1, 4864), simnode.A100MIG("a1", 1, 2, "3g.20gb", 4, 19968)),
		migNode("a2", simnode.A100MIG("a2", 0, 7, "1g.5gb", 1, 4864)),
		claim("x", "a1", contract.MIGDeviceName(0, "1g.5gb", 3)),
		claim("y", "a2", contract.MIGDeviceName(0, "1g.5gb", 0)),
		claim("z", "a2", contract.MIGDeviceName(0, "1g.5gb", 1)),
	}
	objs = append(objs, published("v1", 1)...)
	snap, err := capacity.Load(context.Background(), viewOf(t, objs...))
	if err != nil {
		t.Fatal(err)
	}
	small := snap.Package(&spec.Package{Name: "a100-1g", GPUModel: "NVIDIA A100-SXM4-40GB", MIGProfile: "1g.5gb"})
	if small.Sharing != contract.SharingMIG || small.Isolation != contract.IsolationHardware || small.MIGProfile != "1g.5gb" {
		t.Errorf("1g.5gb package kind = %s, isolation %s, profile %s", small.Sharing, small.Isolation, small.MIGProfile)
	}
	if small.Published != 14 || small.Allocated != 3 || small.Free != 11 {
		t.Errorf("1g.5gb: %+v, want 14 published, 3 allocated, 11 free", small.Counts)
	}
	if len(small.Nodes) != 2 || small.Nodes[0].Node != "a1" || small.Nodes[0].Free != 6 || small.Nodes[1].Free != 5 {
		t.Errorf("1g.5gb per node: %+v", small.Nodes)
	}
	large := snap.Package(&spec.Package{Name: "a100-3g", GPUModel: "NVIDIA A100-SXM4-40GB", MIGProfile: "3g.20gb"})
	if large.Published != 2 || large.Free != 2 || len(large.Nodes) != 1 {
		t.Errorf("3g.20gb: %+v on %+v, want 2 free on a1", large.Counts, large.Nodes)
	}
	none := snap.Package(&spec.Package{Name: "a100-7g", GPUModel: "NVIDIA A100-SXM4-40GB", MIGProfile: "7g.40gb"})
	if none.Published != 0 || none.Free != 0 {
		t.Errorf("7g.40gb, which no node has: %+v", none.Counts)
	}
	// a fraction of the A100 selects none of its MIG instances
	if q := snap.Package(&spec.Package{Name: "a100-q", GPUModel: "NVIDIA A100-SXM4-40GB", Fraction: 25}); q.Published != 0 {
		t.Errorf("a 25 %% A100 package counts %d MIG instances", q.Published)
	}

	var a100s int
	for _, g := range snap.GPUs() {
		if g.Model == "NVIDIA A100-SXM4-40GB" {
			a100s++
			if g.UUID != "GPU-"+g.Node+"-"+string(rune('0'+g.Index)) || g.MemoryBytes != 0 {
				t.Errorf("MIG GPU %+v: want its parent UUID, and no instance's memory as the GPU's", g)
			}
		}
	}
	if a100s != 3 {
		t.Errorf("%d A100 GPUs, want 3 (two on a1, one on a2): %+v", a100s, snap.GPUs())
	}
	for _, d := range snap.Devices() {
		if d.Sharing == contract.SharingMIG && d.MIGProfile == "" {
			t.Errorf("MIG device %s without its profile", d.Name)
		}
	}
}

// A GPU in MIG mode, as the node plugin's own publisher offers it, shows the
// GPU's memory (its counter set's), not 0 and not an instance's, whatever
// order its slices come in.
func TestMIGGPUShowsTheGPUsMemory(t *testing.T) {
	a100 := discovery.GPU{Index: 0, UUID: "GPU-m1-0", Name: "NVIDIA A100-SXM4-40GB", MemoryBytes: 40960 << 20, CCMajor: 8, MIGEnabled: true,
		MIG: []discovery.MIGDevice{{UUID: "MIG-a", Profile: "3g.20gb", MemoryBytes: 19968 << 20, Placement: 4}, {UUID: "MIG-b", Profile: "1g.5gb", MemoryBytes: 4864 << 20}}}
	dr := publish.Build("m1", []discovery.GPU{a100}, publish.Options{})
	built := dr.Pools["m1"].Slices
	slices.Reverse(built) // the devices before their counters
	snap, err := capacity.Load(context.Background(), viewOf(t, sliceObjects("m1", built)...))
	if err != nil {
		t.Fatal(err)
	}
	gpus := snap.GPUs()
	if len(gpus) != 1 || gpus[0].UUID != "GPU-m1-0" || gpus[0].MemoryBytes != 40960<<20 {
		t.Errorf("GPUs %+v: want one, GPU-m1-0 with 40960 MiB", gpus)
	}
}
