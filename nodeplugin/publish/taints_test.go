package publish_test

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestTaints: a tainted GPU's every device, of every kind, carries the
// taint, and no device of another GPU does.
func TestTaints(t *testing.T) {
	s, err := simulate.NewNode([]simulate.Spec{{Profile: "v100-32gb", Count: 2}, {Profile: "a100-40gb", Count: 1, MIG: []string{"3g.20gb", "2g.10gb"}}}, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	gpus := discover(t, s).GPUs
	taint := resourcev1.DeviceTaint{Key: contract.TaintUnhealthy, Value: "xid-79", Effect: resourcev1.DeviceTaintEffectNoSchedule}
	o := publish.Options{Fractions: []int{50, 100}, AnySize: true, TimeSliced: true}
	for _, bad := range []int{1, 2} {
		dr := publish.BuildTainted("node-a", gpus, o, publish.Taints{gpus[bad].UUID: {taint}})
		tainted, kinds := 0, map[string]bool{}
		for _, sl := range dr.Pools["node-a"].Slices {
			for _, d := range sl.Devices {
				gpu := int(*d.Attributes[contract.AttrIndex].IntValue)
				if gpu != bad {
					if len(d.Taints) != 0 {
						t.Errorf("device %s of healthy GPU %d has taints %v", d.Name, gpu, d.Taints)
					}
					continue
				}
				if len(d.Taints) != 1 || d.Taints[0] != taint {
					t.Errorf("device %s of GPU %d has taints %v, want %v", d.Name, gpu, d.Taints, taint)
				}
				tainted++
				kinds[*d.Attributes[contract.AttrSharing].StringValue] = true
			}
		}
		want := map[int]int{1: 2 + 1 + 1 + 1, 2: 2}[bad]
		if tainted != want {
			t.Errorf("GPU %d: %d devices tainted, want %d (kinds %v)", bad, tainted, want, kinds)
		}
	}
}
