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
		{claimOf("", "", dev("gpu-0-50pct-2", "GPU-0", 50)), "to 125% allocated"},
		{claimOf("", "", dev("gpu-1-100pct-1", "GPU-1", 100), dev("gpu-3-100pct-1", "GPU-3", 100)), "already prepared for claim ns/w"},
		{claimOf("", "", dev("gpu-1-100pct-1", "GPU-1", 100), dev("gpu-2-50pct-1", "GPU-2", 50)), "GPU GPU-2 to 150% allocated"},
	} {
		err := conflicts(cp, "new", tc.entry)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.entry, err, tc.want)
		}
	}
	// a claim never conflicts with its own entry
	if err := conflicts(cp, "b", cp.Claims["b"]); err != nil {
		t.Errorf("claim conflicts with itself: %v", err)
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
