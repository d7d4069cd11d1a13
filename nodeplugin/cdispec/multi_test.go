package cdispec_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
)

// TestSpecOfWholeGPUs: a claim of four whole GPUs gets one CDI device with
// every GPU's device node (the driver's shared nodes once), all four UUIDs
// visible, and the claim's budget and share.
func TestSpecOfWholeGPUs(t *testing.T) {
	var gpus []cdispec.GPU
	for _, minor := range []int{0, 1, 2, 3} {
		gpus = append(gpus, cdispec.GPU{UUID: fmt.Sprintf("GPU-%d", minor), Minor: minor})
	}
	spec, err := cdispec.Build(cdispec.Slice{ClaimUID: "uid-4", GPUs: gpus, MemoryBytes: 4 * (32 << 30), Fraction: 100, AccountingDir: "/acct/uid-4"},
		cdispec.Host{ShimLibrary: "/shim.so", PreloadFile: "/preload", Devices: cdispec.Devices{Simulated: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Devices) != 1 || spec.Devices[0].Name != "uid-4" {
		t.Fatalf("devices %+v, want the claim's one", spec.Devices)
	}
	e := spec.Devices[0].ContainerEdits
	var nodes []string
	for _, d := range e.DeviceNodes {
		nodes = append(nodes, fmt.Sprintf("%s %d:%d", d.Path, d.Major, d.Minor))
	}
	want := []string{"/dev/nvidia0 195:0", "/dev/nvidia1 195:1", "/dev/nvidia2 195:2", "/dev/nvidia3 195:3",
		"/dev/nvidiactl 195:255", "/dev/nvidia-uvm 235:0", "/dev/nvidia-uvm-tools 235:1"}
	if !slices.Equal(nodes, want) {
		t.Errorf("device nodes %v, want %v", nodes, want)
	}
	all := strings.Join([]string{"GPU-0", "GPU-1", "GPU-2", "GPU-3"}, ",")
	for _, env := range []string{"CUDA_VISIBLE_DEVICES=" + all, "NVIDIA_VISIBLE_DEVICES=" + all, "GPUSLICE_GPU_UUID=" + all,
		"GPUSLICE_MEMORY_LIMIT=137438953472", "GPUSLICE_COMPUTE_SHARE=100"} {
		if !slices.Contains(e.Env, env) {
			t.Errorf("env lacks %s: %v", env, e.Env)
		}
	}
	if _, err := cdispec.Build(cdispec.Slice{ClaimUID: "uid-0"}, cdispec.Host{}); err == nil || !strings.Contains(err.Error(), "uid-0") {
		t.Errorf("spec without a GPU: %v, want an error naming the claim", err)
	}
}
