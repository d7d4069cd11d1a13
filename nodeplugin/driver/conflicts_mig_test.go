package driver

import (
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

func migDev(name, gpu string) checkpoint.Device {
	return checkpoint.Device{Name: name, GPUUUID: gpu, Sharing: contract.SharingMIG, MemoryBytes: 4864 << 20,
		MIG: &checkpoint.MIGInstance{UUID: "MIG-" + name, Profile: "1g.5gb"}}
}

// A MIG instance is prepared for one claim at a time, and a claim holds
// one instance and nothing beside it: one CUDA process sees one MIG device.
func TestMIGConflictsAndShape(t *testing.T) {
	cp := checkpoint.New("b")
	cp.Claims["a"] = claimOf("ns", "a", migDev("gpu-0-mig-1g-5gb-0", "GPU-0"))
	if err := conflicts(cp, "new", claimOf("", "", migDev("gpu-0-mig-1g-5gb-0", "GPU-0")), gpuMemory32G); err == nil || !strings.Contains(err.Error(), "already prepared for claim ns/a") {
		t.Errorf("same instance for a second claim: %v", err)
	}
	if err := conflicts(cp, "new", claimOf("", "", migDev("gpu-0-mig-1g-5gb-1", "GPU-0")), gpuMemory32G); err != nil {
		t.Errorf("another instance of the GPU: %v", err)
	}
	err := checkShape("ns/c", []checkpoint.Device{migDev("gpu-0-mig-1g-5gb-0", "GPU-0"), dev("gpu-1-100pct-1", "GPU-1", 100)})
	if err == nil || !strings.Contains(err.Error(), "gpu-0-mig-1g-5gb-0 is a MIG instance") {
		t.Errorf("a MIG instance and a whole GPU in one claim: %v", err)
	}
}
