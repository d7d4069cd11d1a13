package shim_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

// TestWholeGPUsClaim: a claim of two whole 32 GiB GPUs has one region with
// a 64 GiB budget and no pacing. A process on GPU 1 (its own simulated
// device) holding 20 GiB does not make GPU 0 look fuller: a process on GPU 0
// sees the device's own figures and can fill it, while the region counts
// both GPUs' use.
func TestWholeGPUsClaim(t *testing.T) {
	e := shimtest.NewEnv(t, 64*GiB)
	e.Vars = append(e.Vars, "GPUSLICE_COMPUTE_SHARE=100")
	gpu0 := start(t, e.Command(true, "gs_probe", "interactive"))
	onGPU1 := e.Command(true, "gs_probe", "interactive")
	onGPU1.Env = append(onGPU1.Env, "FAKEGPU_STATE="+filepath.Join(t.TempDir(), "gpu1"))
	gpu1 := start(t, onGPU1)

	if r := gpu1.alloc(20 * GiB); r != "ok" {
		t.Fatalf("GPU 1: alloc 20 GiB: %s", r)
	}
	var used, free, total uint64
	line := gpu0.say("used")
	if _, err := fmt.Sscanf(line, "used %d free %d total %d", &used, &free, &total); err != nil {
		t.Fatalf("GPU 0: %q: %v", line, err)
	}
	if total != 32*GiB || free != 32*GiB-shimtest.ContextBytes {
		t.Errorf("GPU 0 reports %d free of %d; want its own %d free of 32 GiB, not the claim's use on GPU 1",
			free, total, uint64(32*GiB-shimtest.ContextBytes))
	}
	if want := uint64(20*GiB + 2*shimtest.ContextBytes); used != want {
		t.Errorf("region used %d, want both GPUs' use %d", used, want)
	}
	if r := gpu0.alloc(30 * GiB); r != "ok" {
		t.Errorf("GPU 0: alloc 30 GiB of its 32: %s", r)
	}
	if r := regionOf(t, e); r.MemoryLimit != 64*GiB || r.ComputeShare != 100 || r.Used != 50*GiB+2*shimtest.ContextBytes {
		t.Errorf("region: limit %d share %d used %d", r.MemoryLimit, r.ComputeShare, r.Used)
	}
}
