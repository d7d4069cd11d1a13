package driver

import (
	"encoding/json"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// TestReported: a claim whose status already describes its slice is not
// written again; a different slice or a missing condition is.
func TestReported(t *testing.T) {
	c := checkpoint.Claim{Pool: "n", Device: "gpu-0-25pct-1", GPUUUID: "GPU-0", MemoryBytes: 8 << 30, Fraction: 25}
	claim := func(s SliceStatus, cond bool) *resourceapi.ResourceClaim {
		raw, _ := json.Marshal(s)
		d := resourceapi.AllocatedDeviceStatus{Driver: "gpuslice.dev", Pool: "n", Device: "gpu-0-25pct-1", Data: &runtime.RawExtension{Raw: raw}}
		if cond {
			d.Conditions = []metav1.Condition{{Type: ConditionPrepared, Status: metav1.ConditionTrue}}
		}
		return &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Devices: []resourceapi.AllocatedDeviceStatus{d}}}
	}
	same := sliceStatus("u", c)
	other := same
	other.MemoryLimitBytes = 16 << 30
	for _, tc := range []struct {
		name string
		obj  *resourceapi.ResourceClaim
		want bool
	}{
		{"same slice", claim(same, true), true},
		{"other limits", claim(other, true), false},
		{"no condition", claim(same, false), false},
		{"no status", &resourceapi.ResourceClaim{}, false},
	} {
		if got := reported(tc.obj, "u", c); got != tc.want {
			t.Errorf("%s: reported = %v, want %v", tc.name, got, tc.want)
		}
	}
}
