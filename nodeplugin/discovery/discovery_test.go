package discovery_test

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// A mixed node: an A100 in MIG mode with three instances of different
// profiles, an A100 not in MIG mode and a V100 (no MIG at all). Discovery
// sees each GPU's mode and, for the MIG one, every instance with its
// profile, memory, placement, ids and own UUID.
func TestDiscoverMixedNode(t *testing.T) {
	specs, err := simulate.ParseNode("a100-40gb:1,mig=3g.20gb,2g.10gb,1g.5gb;a100-40gb:1;v100-32gb:1")
	if err != nil {
		t.Fatal(err)
	}
	lib, err := simulate.NewNode(specs, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	res, err := discovery.Discover(lib)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 0 || len(res.GPUs) != 3 {
		t.Fatalf("found %d GPUs, skipped %+v; want 3, none skipped", len(res.GPUs), res.Skipped)
	}
	migGPU, plain, volta := res.GPUs[0], res.GPUs[1], res.GPUs[2]
	if migGPU.Name != "NVIDIA A100-SXM4-40GB" || !migGPU.MIGEnabled {
		t.Errorf("GPU 0 is %q, MIG %v; want the NVIDIA A100-SXM4-40GB in MIG mode", migGPU.Name, migGPU.MIGEnabled)
	}
	if plain.MIGEnabled || len(plain.MIG) != 0 || volta.MIGEnabled || len(volta.MIG) != 0 {
		t.Errorf("GPUs not in MIG mode report MIG: %+v, %+v", plain, volta)
	}
	want := []struct {
		profile   string
		mib       uint64
		placement int
	}{{"3g.20gb", 19968, 0}, {"2g.10gb", 9856, 4}, {"1g.5gb", 4864, 6}}
	if len(migGPU.MIG) != len(want) {
		t.Fatalf("MIG devices %+v, want %d", migGPU.MIG, len(want))
	}
	seen := map[string]bool{}
	for i, w := range want {
		m := migGPU.MIG[i]
		if m.Profile != w.profile || m.MemoryBytes != w.mib<<20 || m.Placement != w.placement {
			t.Errorf("MIG device %d: %s, %d MiB at %d; want %s, %d MiB at %d", i, m.Profile, m.MemoryBytes>>20, m.Placement, w.profile, w.mib, w.placement)
		}
		if !strings.HasPrefix(m.UUID, "MIG-") || m.UUID == migGPU.UUID || seen[m.UUID] {
			t.Errorf("MIG device %d has UUID %q: want its own MIG-… UUID", i, m.UUID)
		}
		seen[m.UUID] = true
		// The ids lead back to the instance through NVML, as the device
		// nodes' minors are looked up by them.
		dev, _ := lib.DeviceGetHandleByIndex(0)
		gi, ret := dev.GetGpuInstanceById(m.GPUInstance)
		if ret != nvml.SUCCESS {
			t.Fatalf("GPU instance %d: %v", m.GPUInstance, ret)
		}
		if info, _ := gi.GetInfo(); int(info.Placement.Start) != m.Placement {
			t.Errorf("GPU instance %d is at %d, discovery says %d", m.GPUInstance, info.Placement.Start, m.Placement)
		}
		if _, ret := gi.GetComputeInstanceById(m.ComputeInstance); ret != nvml.SUCCESS {
			t.Errorf("compute instance %d of GPU instance %d: %v", m.ComputeInstance, m.GPUInstance, ret)
		}
	}
	// NVML finds a MIG device by its UUID, and its parent from it.
	h, ret := lib.DeviceGetHandleByUUID(migGPU.MIG[0].UUID)
	if ret != nvml.SUCCESS {
		t.Fatalf("handle by MIG UUID: %v", ret)
	}
	parent, _ := h.GetDeviceHandleFromMigDeviceHandle()
	if uuid, _ := parent.GetUUID(); uuid != migGPU.UUID {
		t.Errorf("parent of %s is %s, want %s", migGPU.MIG[0].UUID, uuid, migGPU.UUID)
	}
}

// A restarted plugin sees the same MIG devices under the same UUIDs; another
// node's differ.
func TestMIGUUIDsAreStable(t *testing.T) {
	uuids := func(seed string) []string {
		res, err := discovery.Discover(simulate.New(simulate.Spec{Profile: "a100-40gb", Count: 2, MIG: []string{"1g.5gb", "1g.5gb"}}, seed))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range res.GPUs {
			for _, m := range g.MIG {
				out = append(out, m.UUID)
			}
		}
		return out
	}
	a, again, b := uuids("node-a"), uuids("node-a"), uuids("node-b")
	if len(a) != 4 || strings.Join(a, ",") != strings.Join(again, ",") {
		t.Errorf("MIG UUIDs %v then %v: want 4, the same each time", a, again)
	}
	if strings.Join(a, ",") == strings.Join(b, ",") {
		t.Errorf("two nodes share MIG UUIDs %v", a)
	}
}

// Profile names as NVIDIA writes them, from go-nvml's A100 and H100 tables.
func TestMIGProfileNames(t *testing.T) {
	for _, c := range []struct {
		cfg  gpus.Config
		gi   int
		ci   int
		want string
	}{
		{gpus.A100_SXM4_40GB, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, "1g.5gb"},
		{gpus.A100_SXM4_40GB, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, "1g.5gb+me"},
		{gpus.A100_SXM4_40GB, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, "1g.10gb"},
		{gpus.A100_SXM4_40GB, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, "3g.20gb"},
		{gpus.A100_SXM4_40GB, nvml.GPU_INSTANCE_PROFILE_4_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, "2c.4g.20gb"},
		{gpus.A100_SXM4_40GB, nvml.GPU_INSTANCE_PROFILE_7_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, "7g.40gb"},
		{gpus.A100_SXM4_80GB, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, "1g.10gb"},
		{gpus.H100_SXM5_80GB, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, "1g.10gb"},
		{gpus.H100_SXM5_80GB, nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, "3g.40gb"},
		{gpus.H100_SXM5_80GB, nvml.GPU_INSTANCE_PROFILE_7_SLICE, nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, "7g.80gb"},
	} {
		gi := c.cfg.MIGProfiles.GpuInstanceProfiles[c.gi]
		ci := c.cfg.MIGProfiles.ComputeInstanceProfiles[c.gi][c.ci]
		if got := discovery.MIGProfileName(gi, ci, c.cfg.MemoryMB<<20); got != c.want {
			t.Errorf("%s GPU instance profile %d, compute %d: %q, want %q", c.cfg.Name, c.gi, c.ci, got, c.want)
		}
	}
}
