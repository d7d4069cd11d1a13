package driver

import (
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// claimOf is a checkpoint entry of devices given as name, GPU, fraction.
func claimOf(ns, name string, devs ...checkpoint.Device) checkpoint.Claim {
	return checkpoint.Claim{Namespace: ns, Name: name, Devices: devs}
}

func dev(name, gpu string, fraction int) checkpoint.Device {
	return checkpoint.Device{Name: name, GPUUUID: gpu, Fraction: fraction}
}

// TestConflicts: behind the scheduler, the plugin itself refuses a device
// prepared for another claim and slices that would oversubscribe a GPU,
// for each device of a multi-GPU claim too.
func TestConflicts(t *testing.T) {
	cp := checkpoint.New("b")
	cp.Claims["a"] = claimOf("ns", "a", dev("gpu-0-50pct-1", "GPU-0", 50))
	cp.Claims["b"] = claimOf("ns", "b", dev("gpu-0-25pct-1", "GPU-0", 25))
	cp.Claims["w"] = claimOf("ns", "w", dev("gpu-2-100pct-1", "GPU-2", 100), dev("gpu-3-100pct-1", "GPU-3", 100))
	for _, tc := range []struct {
		entry checkpoint.Claim
		want  string
	}{
		{claimOf("", "", dev("gpu-0-25pct-2", "GPU-0", 25)), ""},
		{claimOf("", "", dev("gpu-1-100pct-1", "GPU-1", 100)), ""},
		{claimOf("", "", dev("gpu-0-25pct-1", "GPU-0", 25)), "already prepared for claim ns/b"},
		{claimOf("", "", dev("gpu-0-50pct-2", "GPU-0", 50)), "to 125% of its compute allocated"},
		{claimOf("", "", dev("gpu-1-100pct-1", "GPU-1", 100), dev("gpu-3-100pct-1", "GPU-3", 100)), "already prepared for claim ns/w"},
		{claimOf("", "", dev("gpu-1-100pct-1", "GPU-1", 100), dev("gpu-2-50pct-1", "GPU-2", 50)), "GPU GPU-2 to 150% of its compute allocated"},
	} {
		err := conflicts(cp, "new", tc.entry, gpuMemory32G)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.entry, err, tc.want)
		}
	}
	// a claim never conflicts with its own entry
	if err := conflicts(cp, "b", cp.Claims["b"], gpuMemory32G); err != nil {
		t.Errorf("claim conflicts with itself: %v", err)
	}
}

func gpuMemory32G(string) uint64 { return 32 << 30 }

func share(sharing, shareID, gpu string, memory uint64, compute int, shares int64) checkpoint.Device {
	return checkpoint.Device{Name: "gpu-" + gpu + "-" + sharing, GPUUUID: gpu, Sharing: sharing, ShareID: shareID, MemoryBytes: memory, Fraction: compute, Shares: shares}
}

// TestConflictsOfShares: shares of one any-size device are different
// claims' as long as their share IDs differ, and together never exceed the
// GPU's memory or compute, whatever partitions also hold of it; a GPU is
// never both time-sliced and isolated, and its time-sliced shares never
// exceed the whole.
func TestConflictsOfShares(t *testing.T) {
	cp := checkpoint.New("b")
	cp.Claims["a"] = claimOf("ns", "a", share("any-size", "s1", "GPU-0", 20<<30, 60, 0))
	quarter := dev("gpu-1-25pct-1", "GPU-1", 25)
	quarter.MemoryBytes = 8 << 30
	cp.Claims["p"] = claimOf("ns", "p", quarter)
	cp.Claims["t"] = claimOf("ns", "t", share("time-sliced", "s2", "GPU-2", 0, 0, 500000))
	for _, tc := range []struct {
		entry checkpoint.Claim
		want  string
	}{
		{claimOf("", "", share("any-size", "s3", "GPU-0", 6<<30, 20, 0)), ""},
		{claimOf("", "", share("any-size", "s3", "GPU-0", 12<<30, 40, 0)), ""},
		{claimOf("", "", share("any-size", "s1", "GPU-0", 1<<30, 1, 0)), "already prepared for claim ns/a"},
		{claimOf("", "", share("any-size", "s3", "GPU-0", 13<<30, 10, 0)), "to 35433480192 bytes of memory allocated, more than its 34359738368"},
		{claimOf("", "", share("any-size", "s3", "GPU-0", 1<<30, 41, 0)), "to 101% of its compute allocated"},
		{claimOf("", "", share("any-size", "s3", "GPU-1", 25<<30, 70, 0)), "GPU GPU-1 to 35433480192 bytes"},
		{claimOf("", "", share("any-size", "s3", "GPU-1", 24<<30, 75, 0)), ""},
		{claimOf("", "", share("time-sliced", "s4", "GPU-2", 0, 0, 500000)), ""},
		{claimOf("", "", share("time-sliced", "s4", "GPU-2", 0, 0, 500001)), "1000001 of its 1000000 time-sliced shares"},
		{claimOf("", "", share("time-sliced", "s4", "GPU-0", 0, 0, 1)), "would time-slice GPU GPU-0, where claim ns/a holds an isolated slice"},
		{claimOf("", "", dev("gpu-2-25pct-1", "GPU-2", 25)), "which claim ns/t time-slices without limits"},
	} {
		err := conflicts(cp, "new", tc.entry, gpuMemory32G)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.entry, err, tc.want)
		}
	}
}

// TestCheckShape: one slice of any size, or whole GPUs each on its own GPU;
// never two devices on one GPU, never several partial GPUs, each refusal
// saying what to ask for instead.
func TestCheckShape(t *testing.T) {
	for _, tc := range []struct {
		devs []checkpoint.Device
		want []string
	}{
		{[]checkpoint.Device{dev("gpu-0-25pct-1", "GPU-0", 25)}, nil},
		{[]checkpoint.Device{dev("gpu-0-100pct-1", "GPU-0", 100), dev("gpu-1-100pct-1", "GPU-1", 100)}, nil},
		{[]checkpoint.Device{dev("gpu-0-50pct-1", "GPU-0", 50), dev("gpu-0-50pct-2", "GPU-0", 50)},
			[]string{"gpu-0-50pct-1 and gpu-0-50pct-2, both on GPU GPU-0", "each be a different GPU"}},
		{[]checkpoint.Device{dev("gpu-0-100pct-1", "GPU-0", 100), dev("gpu-1-50pct-1", "GPU-1", 50)},
			[]string{"gpu-1-50pct-1 is a 50% slice", "only when each is a whole GPU", "one slice per claim"}},
		{[]checkpoint.Device{dev("gpu-0-25pct-1", "GPU-0", 25), dev("gpu-1-25pct-1", "GPU-1", 25)},
			[]string{"allocated 2 gpuslice devices", "is a 25% slice"}},
		{[]checkpoint.Device{dev("gpu-0-100pct-1", "GPU-0", 100), share("any-size", "s1", "GPU-1", 32<<30, 100, 0)},
			[]string{"gpu-GPU-1-any-size is a share of an any-size device", "only when each is a whole GPU"}},
	} {
		err := checkShape("ns/c", tc.devs)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%v: refused: %v", tc.devs, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: allowed, want a refusal", tc.devs)
			continue
		}
		for _, w := range append(tc.want, "ns/c") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", tc.devs, err, w)
			}
		}
	}
}
