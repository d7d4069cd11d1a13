package capacity_test

import (
	"context"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/capacity"
	"github.com/gpuslice/gpuslice/engine/spec"
)

func taintRule(name, driver, pool, device string, effect resourcev1.DeviceTaintEffect) *resourcev1.DeviceTaintRule {
	sel := &resourcev1.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To(pool)}
	if device != "" {
		sel.Device = ptr.To(device)
	}
	return &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: sel, Taint: resourcev1.DeviceTaint{Key: "example.com/maintenance", Effect: effect}}}
}

// A drained GPU's slices are not free: a NoSchedule DeviceTaintRule on
// node n2's pool (a node drain) leaves it none, a NoExecute taint the node
// plugin publishes on one quarter of n1 leaves three; rules of effect None
// or of another driver change nothing. Published and allocated count as
// before.
func TestTaintedDevicesAreNotFree(t *testing.T) {
	objs := append(gpu("n1"), gpu("n2")...)
	sl := objs[0].(*resourcev1.ResourceSlice)
	sl.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "gpuslice.dev/unhealthy", Effect: resourcev1.DeviceTaintEffectNoExecute}}
	objs = append(objs,
		taintRule("drain-n2", contract.DriverName, "n2", "", resourcev1.DeviceTaintEffectNoSchedule),
		taintRule("note-n1", contract.DriverName, "n1", "", resourcev1.DeviceTaintEffectNone),
		taintRule("other-driver", "other.example.com", "n1", "gpu-0-100pct-1", resourcev1.DeviceTaintEffectNoSchedule),
		claim("a", "n2", "gpu-0-25pct-1"))
	snap, err := capacity.Load(context.Background(), viewOf(t, objs...))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fraction                   int
		published, allocated, free int64
	}{
		{25, 8, 1, 3},
		{50, 4, 0, 2},
		{100, 2, 0, 1},
	} {
		p := snap.Package(&spec.Package{Name: "p", GPUModel: model, Fraction: tc.fraction})
		if p.Published != tc.published || p.Allocated != tc.allocated || p.Free != tc.free {
			t.Errorf("%d %%: published %d allocated %d free %d; want %d %d %d", tc.fraction, p.Published, p.Allocated, p.Free, tc.published, tc.allocated, tc.free)
		}
		for _, n := range p.Nodes {
			if n.Node == "n2" && n.Free != 0 {
				t.Errorf("%d %%: drained n2 has %d free", tc.fraction, n.Free)
			}
		}
	}
}

// A drained GPU gives no new share of its any-size or time-sliced device,
// whatever it has left.
func TestTaintedSharedDevicesGiveNoShare(t *testing.T) {
	small := &spec.Package{Name: "any-6gi", GPUModel: model, Memory: "6Gi", MemoryBytes: 6 << 30, ComputeShare: 20}
	shared := &spec.Package{Name: "ts-4", GPUModel: model, Sharing: spec.SharingTimeSliced, Replicas: 4}
	objs := published("n1", 3)
	objs = append(objs,
		taintRule("drain-any", contract.DriverName, "n1", "gpu-0-any-size", resourcev1.DeviceTaintEffectNoSchedule),
		taintRule("drain-ts", contract.DriverName, "n1", "gpu-2-time-sliced", resourcev1.DeviceTaintEffectNoExecute),
		shareClaim("a", "n1", "gpu-0-any-size", "any-6gi", map[string]string{"memory": "6Gi", "compute": "20"}))
	snap, err := capacity.Load(context.Background(), viewOf(t, objs...))
	if err != nil {
		t.Fatal(err)
	}
	// untainted, GPU 0's any-size device would give 4 more small shares
	// and GPU 2's time-sliced one 4 time-sliced; GPU 1 gives 5 or 4, GPU
	// 2's any-size device 5
	if p := snap.Package(small); p.Free != 10 || p.Allocated != 1 {
		t.Errorf("any-size: allocated %d free %d, want 1 and 10", p.Allocated, p.Free)
	}
	if p := snap.Package(shared); p.Free != 4 {
		t.Errorf("time-sliced: free %d, want 4", p.Free)
	}
}
