package maintenance

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/simnode"
)

// A MIG instance belongs to its parent GPU (its own uuid is the
// instance's): draining the GPU by index or by the parent's UUID takes
// every instance cut from it and none of the other GPU's.
func TestMIGInstancesGroupUnderTheirGPU(t *testing.T) {
	instances := append(simnode.A100MIG("n", 0, 7, "1g.5gb", 1, 4864), simnode.A100MIG("n", 1, 2, "3g.20gb", 4, 19968)...)
	sl := resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: contract.DriverName, NodeName: ptr.To("n"), Pool: resourcev1.ResourcePool{Name: "n"}}}
	for _, m := range instances {
		sl.Spec.Devices = append(sl.Spec.Devices, simnode.MIGDevice(m))
	}
	gpus := groupGPUs([]resourcev1.ResourceSlice{sl})
	if len(gpus) != 2 || len(gpus[0].Devices) != 7 || len(gpus[1].Devices) != 2 || gpus[0].UUID != instances[0].ParentUUID {
		t.Fatalf("grouped into %d GPUs: %+v", len(gpus), gpus)
	}
	for _, sel := range []string{"1", instances[len(instances)-1].ParentUUID} {
		g, err := pick(gpus, Target{Node: "n", GPU: sel})
		if err != nil || g.Index != 1 {
			t.Errorf("GPU %s: %+v %v", sel, g, err)
		}
	}
	if _, err := pick(gpus, Target{Node: "n", GPU: instances[0].UUID}); err == nil || !strings.Contains(err.Error(), "node n has no GPU "+instances[0].UUID) {
		t.Errorf("a MIG instance's own UUID picked a GPU: %v", err)
	}
}

// A rule's name stays a valid object name however long the node's.
func TestRuleNamesAreValid(t *testing.T) {
	node := strings.Repeat("node.", 49) + "x" // 246 characters, a valid node name
	g := &GPU{Node: node, Index: 3, UUID: "GPU-1"}
	for _, r := range []*resourcev1.DeviceTaintRule{desired(node, g, node, "gpu-3-25pct-4", resourcev1.DeviceTaintEffectNoSchedule), desired(node, nil, node, "", resourcev1.DeviceTaintEffectNoExecute)} {
		if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
			t.Errorf("%s: %v", r.Name, errs)
		}
	}
	if r := desired("n1", g, "n1", "gpu-3-25pct-4", resourcev1.DeviceTaintEffectNoSchedule); r.Name != "gpuslice-drain-n1-gpu-3-gpu-3-25pct-4" {
		t.Errorf("short name shortened: %s", r.Name)
	}
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]Target{"n1": {Node: "n1"}, "n1/0": {Node: "n1", GPU: "0"}, "n1/GPU-ab": {Node: "n1", GPU: "GPU-ab"}} {
		if got, err := ParseTarget(in); err != nil || got != want {
			t.Errorf("%q: %+v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "/0", "n1/", "n1/0/1"} {
		if _, err := ParseTarget(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
