package publish_test

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// A mixed node publishes its GPU in MIG mode as its instances only (never
// a partition, any-size or time-sliced device of it, whatever the options
// say), and its other GPUs as slices, with no MIG device among them.
func TestMixedNodePublishesMIGOnlyOnTheMIGGPU(t *testing.T) {
	gpus := discoverNode(t, "a100-40gb:1,mig=3g.20gb,1g.5gb*3;a100-40gb:1")
	o := publish.Options{Fractions: contract.DefaultFractions, AnySize: true, TimeSliced: true}
	pool := publish.Build("node-a", gpus, o).Pools["node-a"]
	if len(pool.Slices) != 4 {
		t.Fatalf("%d slices, want 4 (a counter slice and a device slice per GPU)", len(pool.Slices))
	}
	migGPU, plainGPU := gpus[0], gpus[1]

	migSlice := pool.Slices[1].Devices
	var names []string
	for _, d := range migSlice {
		names = append(names, d.Name)
		attr := func(name string) resourcev1.DeviceAttribute { return d.Attributes[resourcev1.QualifiedName(name)] }
		if s := attr(contract.AttrSharing).StringValue; s == nil || *s != contract.SharingMIG {
			t.Errorf("%s: sharing %v, want %q: a MIG GPU is never sliced in software", d.Name, s, contract.SharingMIG)
			continue
		}
		if *attr(contract.AttrIsolation).StringValue != contract.IsolationHardware || *attr(contract.AttrFraction).IntValue != 0 {
			t.Errorf("%s: isolation %s, fraction %d; want hardware, 0", d.Name, *attr(contract.AttrIsolation).StringValue, *attr(contract.AttrFraction).IntValue)
		}
		if *attr(contract.AttrModel).StringValue != "NVIDIA A100-SXM4-40GB" || *attr(contract.AttrIndex).IntValue != 0 ||
			*attr(contract.AttrParentUUID).StringValue != migGPU.UUID || !strings.HasPrefix(*attr(contract.AttrUUID).StringValue, "MIG-") {
			t.Errorf("%s: model %s, index %d, parent %s, uuid %s; want the parent's model, index and UUID and its own MIG UUID", d.Name,
				*attr(contract.AttrModel).StringValue, *attr(contract.AttrIndex).IntValue, *attr(contract.AttrParentUUID).StringValue, *attr(contract.AttrUUID).StringValue)
		}
		profile, placement := *attr(contract.AttrMIGProfile).StringValue, int(*attr(contract.AttrMIGPlacement).IntValue)
		if d.Name != contract.MIGDeviceName(0, profile, placement) {
			t.Errorf("device %s has profile %s at %d: want it named %s", d.Name, profile, placement, contract.MIGDeviceName(0, profile, placement))
		}
		want := map[string]int64{"3g.20gb": 19968 << 20, "1g.5gb": 4864 << 20}[profile]
		if mem := d.Capacity[contract.CapacityMemory].Value; mem.Value() != want {
			t.Errorf("%s: memory capacity %s, want %d (the profile's)", d.Name, mem.String(), want)
		}
		if len(d.ConsumesCounters) != 1 || d.ConsumesCounters[0].CounterSet != "gpu-0" || d.AllowMultipleAllocations != nil {
			t.Errorf("%s: consumes %+v, multiple allocations %v; want its memory from gpu-0, allocated once", d.Name, d.ConsumesCounters, d.AllowMultipleAllocations)
		}
	}
	if strings.Join(names, " ") != "gpu-0-mig-3g-20gb-0 gpu-0-mig-1g-5gb-4 gpu-0-mig-1g-5gb-5 gpu-0-mig-1g-5gb-6" {
		t.Errorf("MIG GPU publishes %v, want its four instances only", names)
	}

	for _, d := range pool.Slices[3].Devices {
		s := *d.Attributes[contract.AttrSharing].StringValue
		if s == contract.SharingMIG || d.Attributes[contract.AttrMIGProfile].StringValue != nil {
			t.Errorf("GPU 1, not in MIG mode, offers MIG device %s", d.Name)
		}
		if *d.Attributes[contract.AttrUUID].StringValue != plainGPU.UUID {
			t.Errorf("%s: uuid %s, want the GPU's %s", d.Name, *d.Attributes[contract.AttrUUID].StringValue, plainGPU.UUID)
		}
	}
	if n := len(pool.Slices[3].Devices); n != 4+2+1+2 {
		t.Errorf("GPU 1 offers %d devices, want 9 (7 partitions, any-size, time-sliced)", n)
	}
	if n := len(publish.Devices(gpus, o)); n != 4+9 {
		t.Errorf("Devices lists %d, want 13", n)
	}
}

// A GPU in MIG mode with no instance publishes nothing, not an empty GPU.
func TestMIGGPUWithoutInstancesOffersNothing(t *testing.T) {
	res := discover(t, simulate.New(simulate.Spec{Profile: "a100-40gb", Count: 1}, "node-a"))
	res.GPUs[0].MIGEnabled = true
	if pool := publish.Build("node-a", res.GPUs, publish.Options{Fractions: contract.DefaultFractions}).Pools["node-a"]; len(pool.Slices) != 0 {
		t.Errorf("published %d slices for a MIG GPU without instances", len(pool.Slices))
	}
}

// Options that offer no software slices suit a node whose GPUs are all in
// MIG mode, which then publishes its instances; on a node with a GPU not in
// MIG mode they are an error naming that GPU and the flags to set.
func TestNoSlicesOnlyForMIGNodes(t *testing.T) {
	none := publish.Options{}
	migOnly := discoverNode(t, "a100-40gb:2,mig=3g.20gb,1g.5gb*2")
	if err := none.Validate(migOnly); err != nil {
		t.Errorf("MIG-only node without fractions: %v", err)
	}
	if devs := publish.Devices(migOnly, none); len(devs) != 6 {
		t.Errorf("MIG-only node without fractions publishes %d devices, want its 6 instances", len(devs))
	}
	err := none.Validate(discoverNode(t, "a100-40gb:1,mig=1g.5gb*2;v100-32gb:1"))
	if err == nil || !strings.Contains(err.Error(), "GPU 1 (Tesla V100-PCIE-32GB) is not in MIG mode") || !strings.Contains(err.Error(), "--fractions") {
		t.Errorf("mixed node without fractions: %v, want an error naming GPU 1 and --fractions", err)
	}
	if err := (publish.Options{AnySize: true}).Validate(discoverNode(t, "v100-32gb:1")); err != nil {
		t.Errorf("any-size only: %v", err)
	}
}

// discoverNode is what discovery finds on node-a simulated as spec says
// (simulate.ParseNode's form, e.g. "a100-40gb:1,mig=1g.5gb*2;v100-32gb:1").
func discoverNode(t *testing.T, spec string) []discovery.GPU {
	t.Helper()
	specs, err := simulate.ParseNode(spec)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := simulate.NewNode(specs, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	return discover(t, lib).GPUs
}
