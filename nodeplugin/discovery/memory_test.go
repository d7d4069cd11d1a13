package discovery_test

import (
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// A driver keeps part of a GPU's memory for itself, which no allocation
// gets: discovery publishes NVML's v2 total less that reservation, so
// slices that add up to the GPU all fill. A driver without the v2 call
// (it answers NOT_SUPPORTED or FUNCTION_NOT_FOUND, or its library lacks
// the symbol, which is then never called) gives v1's total, and the GPU
// says which it was. MIG profile names still come from the board's total.
func TestMemoryLessTheDriversReservation(t *testing.T) {
	const total, reserved = 40960 << 20, 423 << 20
	v2 := func(m nvml.Memory_v2, ret nvml.Return) func() (nvml.Memory_v2, nvml.Return) {
		return func() (nvml.Memory_v2, nvml.Return) { return m, ret }
	}
	for _, c := range []struct {
		name       string
		v2         func() (nvml.Memory_v2, nvml.Return)
		noSymbol   bool
		wantBytes  uint64
		wantSource string
	}{
		{"v2", v2(nvml.Memory_v2{Total: total, Reserved: reserved, Free: total - reserved}, nvml.SUCCESS), false, total - reserved, discovery.MemoryNVMLv2},
		{"v2 not supported", v2(nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED), false, total, discovery.MemoryNVMLv1},
		{"v2 not found", v2(nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND), false, total, discovery.MemoryNVMLv1},
		{"no v2 symbol", func() (nvml.Memory_v2, nvml.Return) {
			t.Error("called nvmlDeviceGetMemoryInfo_v2, which the library does not have")
			return nvml.Memory_v2{}, nvml.ERROR_UNKNOWN
		}, true, total, discovery.MemoryNVMLv1},
	} {
		t.Run(c.name, func(t *testing.T) {
			lib := simulate.New(simulate.Spec{Profile: "a100-40gb", Count: 1, MIG: []string{"3g.20gb", "1g.5gb"}}, "node")
			lib.Devices[0].(*server.Device).GetMemoryInfo_v2Func = c.v2
			if c.noSymbol {
				lib.LookupSymbolFunc = func(s string) error {
					if s == "nvmlDeviceGetMemoryInfo_v2" {
						return errors.New("undefined symbol")
					}
					return nil
				}
			}
			res, err := discovery.Discover(lib)
			if err != nil || len(res.GPUs) != 1 {
				t.Fatalf("discover: %v, %+v", err, res)
			}
			g := res.GPUs[0]
			if g.MemoryBytes != c.wantBytes || g.MemorySource != c.wantSource {
				t.Errorf("memory %d bytes from %q, want %d from %q", g.MemoryBytes, g.MemorySource, c.wantBytes, c.wantSource)
			}
			if len(g.MIG) != 2 || g.MIG[0].Profile != "3g.20gb" || g.MIG[1].Profile != "1g.5gb" {
				t.Errorf("MIG devices %+v, want 3g.20gb and 1g.5gb", g.MIG)
			}
		})
	}
}

// A GPU whose v2 memory info fails otherwise is skipped with the reason,
// as when v1 fails: NVML that cannot read it cannot be trusted with it.
func TestMemoryUnreadable(t *testing.T) {
	lib := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, "node")
	lib.Devices[1].(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_GPU_IS_LOST }
	res, err := discovery.Discover(lib)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GPUs) != 1 || len(res.Skipped) != 1 || res.Skipped[0].Index != 1 {
		t.Fatalf("GPUs %+v, skipped %+v: want GPU 1 skipped", res.GPUs, res.Skipped)
	}
	if g := res.GPUs[0]; g.MemoryBytes != 32<<30 || g.MemorySource != discovery.MemoryNVMLv2 {
		t.Errorf("the simulated V100: %d bytes from %q, want all 32 GiB from v2 (it reserves nothing)", g.MemoryBytes, g.MemorySource)
	}
	t.Logf("skipped: %s", res.Skipped[0].Reason)
}
