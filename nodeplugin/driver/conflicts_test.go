package driver

import (
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// TestConflicts: behind the scheduler, the plugin itself refuses a device
// prepared for another claim and slices that would oversubscribe a GPU.
func TestConflicts(t *testing.T) {
	cp := checkpoint.New("b")
	cp.Claims["a"] = checkpoint.Claim{Device: "gpu-0-50pct-1", GPUUUID: "GPU-0", Fraction: 50, Namespace: "ns", Name: "a"}
	cp.Claims["b"] = checkpoint.Claim{Device: "gpu-0-25pct-1", GPUUUID: "GPU-0", Fraction: 25, Namespace: "ns", Name: "b"}
	for _, tc := range []struct {
		entry checkpoint.Claim
		want  string
	}{
		{checkpoint.Claim{Device: "gpu-0-25pct-2", GPUUUID: "GPU-0", Fraction: 25}, ""},
		{checkpoint.Claim{Device: "gpu-1-100pct-1", GPUUUID: "GPU-1", Fraction: 100}, ""},
		{checkpoint.Claim{Device: "gpu-0-25pct-1", GPUUUID: "GPU-0", Fraction: 25}, "already prepared for claim ns/b"},
		{checkpoint.Claim{Device: "gpu-0-50pct-2", GPUUUID: "GPU-0", Fraction: 50}, "to 125% allocated"},
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
