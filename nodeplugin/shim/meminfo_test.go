package shim_test

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

// A driver keeps some of the GPU's memory for itself: NVML's v2 memory
// info says how much (v1 counts it as used), and CUDA never offers it. The
// node plugin publishes the rest, so a claim of the whole GPU has that much
// as its limit. Through the library both NVML calls report the claim's
// slice alike (nothing of it is reserved), and CUDA agrees with them.
func TestReportsTheDriversReservation(t *testing.T) {
	const total, reserved = 32 * GiB, 411 << 20
	bare := shimtest.NewEnv(t, slice)
	bare.Vars = append(bare.Vars, "FAKEGPU_RESERVED_BYTES="+strconv.Itoa(reserved))
	out := run(t, bare.Command(false, "gs_probe", "info"))
	for _, c := range []struct {
		prefix, key string
		want        uint64
	}{
		{"nvmlDeviceGetMemoryInfo_v2", "total", total}, {"nvmlDeviceGetMemoryInfo_v2", "reserved", reserved},
		{"nvmlDeviceGetMemoryInfo_v2", "used", shimtest.ContextBytes},
		{"nvmlDeviceGetMemoryInfo_v2", "free", total - reserved - shimtest.ContextBytes},
		{"nvmlDeviceGetMemoryInfo", "total", total}, {"nvmlDeviceGetMemoryInfo", "used", reserved + shimtest.ContextBytes},
		{"nvmlDeviceGetMemoryInfo", "free", total - reserved - shimtest.ContextBytes},
		{"cuMemGetInfo_v2", "total", total - reserved}, {"cuDeviceTotalMem_v2", "total", total - reserved},
	} {
		if got := field(t, out, c.prefix, c.key); got != c.want {
			t.Errorf("the driver without the library: %s %s = %d, want %d", c.prefix, c.key, got, c.want)
		}
	}

	for _, limit := range []uint64{slice, total - reserved} {
		e := shimtest.NewEnv(t, limit)
		e.Vars = append(e.Vars, "FAKEGPU_RESERVED_BYTES="+strconv.Itoa(reserved))
		out := run(t, e.Command(true, "gs_probe", "info"))
		for _, c := range []struct {
			prefix, key string
			want        uint64
		}{
			{"nvmlDeviceGetMemoryInfo_v2", "total", limit}, {"nvmlDeviceGetMemoryInfo_v2", "reserved", 0},
			{"nvmlDeviceGetMemoryInfo_v2", "used", shimtest.ContextBytes},
			{"nvmlDeviceGetMemoryInfo_v2", "free", limit - shimtest.ContextBytes},
			{"nvmlDeviceGetMemoryInfo", "total", limit}, {"nvmlDeviceGetMemoryInfo", "used", shimtest.ContextBytes},
			{"nvmlDeviceGetMemoryInfo", "free", limit - shimtest.ContextBytes},
			{"cuMemGetInfo_v2", "total", limit}, {"cuMemGetInfo_v2", "free", limit - shimtest.ContextBytes},
			{"cuDeviceTotalMem_v2", "total", limit},
		} {
			if got := field(t, out, c.prefix, c.key); got != c.want {
				t.Errorf("a claim of %d MiB: %s %s = %d, want %d", limit>>20, c.prefix, c.key, got, c.want)
			}
		}
	}
}

// The node plugin's discovery, through go-nvml and the fake driver library
// as through a real one: it publishes the memory v2 leaves after the
// driver's reservation, which is what CUDA offers (cuDeviceTotalMem_v2 in
// TestReportsTheDriversReservation).
func TestDiscoveryPublishesWhatTheDriverLeaves(t *testing.T) {
	const reserved = 411 << 20
	e := shimtest.NewEnv(t, 0)
	t.Setenv("FAKEGPU_STATE", e.FakeState)
	t.Setenv("FAKEGPU_RESERVED_BYTES", strconv.Itoa(reserved))
	lib := nvml.New(nvml.WithLibraryPath(filepath.Join(e.Bin, "fake", "libnvidia-ml.so.1")))
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Fatalf("initialise the fake driver's NVML: %v", ret)
	}
	defer lib.Shutdown()
	res, err := discovery.Discover(lib)
	if err != nil || len(res.GPUs) != 1 {
		t.Fatalf("discover: %v, %+v", err, res)
	}
	if g := res.GPUs[0]; g.MemoryBytes != 32*GiB-reserved || g.MemorySource != discovery.MemoryNVMLv2 {
		t.Errorf("published %d bytes from %q, want %d from %q", g.MemoryBytes, g.MemorySource, uint64(32*GiB-reserved), discovery.MemoryNVMLv2)
	}
}
