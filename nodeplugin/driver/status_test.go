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
	d0 := checkpoint.Device{Pool: "n", Name: "gpu-0-25pct-1", GPUUUID: "GPU-0", MemoryBytes: 8 << 30, Fraction: 25}
	c := checkpoint.Claim{Devices: []checkpoint.Device{d0}}
	claim := func(s SliceStatus, cond bool) *resourceapi.ResourceClaim {
		raw, _ := json.Marshal(s)
		d := resourceapi.AllocatedDeviceStatus{Driver: "gpuslice.dev", Pool: "n", Device: "gpu-0-25pct-1", Data: &runtime.RawExtension{Raw: raw}}
		if cond {
			d.Conditions = []metav1.Condition{{Type: ConditionPrepared, Status: metav1.ConditionTrue}}
		}
		return &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Devices: []resourceapi.AllocatedDeviceStatus{d}}}
	}
	same := sliceStatus("u", d0)
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

// TestReportedMultiGPU: a claim of two whole GPUs counts as reported only
// when both devices are.
func TestReportedMultiGPU(t *testing.T) {
	devs := []checkpoint.Device{
		{Pool: "n", Name: "gpu-0-100pct-1", GPUUUID: "GPU-0", MemoryBytes: 32 << 30, Fraction: 100},
		{Pool: "n", Name: "gpu-1-100pct-1", GPUUUID: "GPU-1", GPUIndex: 1, MemoryBytes: 32 << 30, Fraction: 100},
	}
	c := checkpoint.Claim{Devices: devs}
	status := func(ds ...checkpoint.Device) *resourceapi.ResourceClaim {
		obj := &resourceapi.ResourceClaim{}
		for _, d := range ds {
			raw, _ := json.Marshal(sliceStatus("u", d))
			obj.Status.Devices = append(obj.Status.Devices, resourceapi.AllocatedDeviceStatus{Driver: "gpuslice.dev", Pool: "n", Device: d.Name,
				Data: &runtime.RawExtension{Raw: raw}, Conditions: []metav1.Condition{{Type: ConditionPrepared, Status: metav1.ConditionTrue}}})
		}
		return obj
	}
	if reported(status(devs[0]), "u", c) {
		t.Error("one of two GPUs reported counts as the claim reported")
	}
	if !reported(status(devs...), "u", c) {
		t.Error("both GPUs reported: not taken as reported")
	}
}
