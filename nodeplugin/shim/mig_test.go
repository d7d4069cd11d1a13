package shim_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

// In a MIG claim's container (no shim; the environment a simulated node's
// CDI spec sets) the fake driver is the MIG instance, as a real driver is:
// nvidia-smi -L lists it under its GPU, CUDA's device is the instance with
// the profile's memory, and allocations past it fail.
func TestFakeDriverIsTheMIGInstance(t *testing.T) {
	const memory = 4864 << 20
	e := shimtest.NewEnv(t, 0)
	e.Vars = []string{
		cdispec.EnvSimGPUName + "=NVIDIA A100-SXM4-40GB", cdispec.EnvSimGPUUUID + "=GPU-0a1b", cdispec.EnvSimGPUCC + "=8.0",
		cdispec.EnvSimMIGUUID + "=MIG-5c7d", cdispec.EnvSimMIGProfile + "=1g.5gb", cdispec.EnvSimMIGMemory + "=" + strconv.Itoa(memory),
	}
	list := run(t, e.Command(false, "gpuslice-smi", "-L"))
	if !regexp.MustCompile(`(?m)^GPU 0: NVIDIA A100-SXM4-40GB \(UUID: GPU-0a1b\)\n  MIG 1g\.5gb +Device +0: \(UUID: MIG-5c7d\)$`).MatchString(list) {
		t.Errorf("nvidia-smi -L:\n%s", list)
	}
	table := run(t, e.Command(false, "gpuslice-smi"))
	if !strings.Contains(table, "| 0:0 | MIG 1g.5gb") || !strings.Contains(table, "0MiB /   4864MiB") {
		t.Errorf("nvidia-smi does not show the instance's 4864 MiB:\n%s", table)
	}
	info := run(t, e.Command(false, "gs_probe", "info"))
	if got := field(t, info, "cuMemGetInfo_v2", "total"); got != memory {
		t.Errorf("cuMemGetInfo total %d, want the profile's %d", got, memory)
	}
	if got := field(t, info, "cuDeviceTotalMem_v2", "total"); got != memory {
		t.Errorf("cuDeviceTotalMem total %d, want the profile's %d", got, memory)
	}
	// the V100 when nothing names an instance
	e.Vars = nil
	if list := run(t, e.Command(false, "gpuslice-smi", "-L")); strings.Contains(list, "MIG") || !strings.Contains(list, "Tesla V100-PCIE-32GB") {
		t.Errorf("without a MIG instance, nvidia-smi -L:\n%s", list)
	}
}

// Allocations on the instance stop at its memory, with no shim preloaded:
// the hardware's limit.
func TestFakeMIGInstanceMemoryIsItsLimit(t *testing.T) {
	e := shimtest.NewEnv(t, 0)
	e.Vars = []string{cdispec.EnvSimMIGUUID + "=MIG-5c7d", cdispec.EnvSimMIGProfile + "=1g.5gb", cdispec.EnvSimMIGMemory + "=" + strconv.Itoa(4864<<20)}
	cmd := e.Command(false, "gs_probe", "interactive")
	cmd.Stdin = strings.NewReader("alloc 4294967296\nalloc 1073741824\nexit\n")
	out := run(t, cmd)
	if !regexp.MustCompile(`(?s)ok \d+\nerr 2\n`).MatchString(out) {
		t.Errorf("4 GiB then 1 GiB on a 4864 MiB instance: want the first to succeed, the second CUDA_ERROR_OUT_OF_MEMORY:\n%s", out)
	}
}
