package cdispec_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
)

// fakeDriverRoot lays out a driver root with a real shared object
// (built by gcc with the soname libcuda.so.1) and an nvidia-smi.
func fakeDriverRoot(t *testing.T, version string) string {
	t.Helper()
	root := t.TempDir()
	libDir := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	os.MkdirAll(libDir, 0o755)
	os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755)
	src := filepath.Join(t.TempDir(), "cuda.c")
	os.WriteFile(src, []byte("int cuInit(unsigned f) { return 0; }\n"), 0o644)
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", filepath.Join(libDir, "libcuda.so."+version), src).CombinedOutput()
	if err != nil {
		t.Fatalf("build a fake libcuda with gcc: %v\n%s", err, out)
	}
	// a library of another driver version must not be picked up
	os.WriteFile(filepath.Join(libDir, "libnvidia-ml.so.470.1"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(root, "usr/bin/nvidia-smi"), []byte("#!/bin/sh\n"), 0o755)
	return root
}

func TestFindDriverFiles(t *testing.T) {
	root := fakeDriverRoot(t, "550.54.15")
	files, err := cdispec.FindDriverFiles(root, "/run/nvidia/driver", "550.54.15")
	if err != nil {
		t.Fatal(err)
	}
	// the plugin reads the driver under root; the specs name host paths
	lib := "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"
	want := []cdispec.DriverFile{
		{HostPath: "/run/nvidia/driver/usr/bin/nvidia-smi", ContainerPath: "/usr/bin/nvidia-smi"},
		{HostPath: lib, ContainerPath: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
		{HostPath: lib, ContainerPath: "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"},
	}
	if !slices.Equal(files, want) {
		t.Fatalf("found %+v\nwant %+v", files, want)
	}
	if files, err := cdispec.FindDriverFiles(t.TempDir(), "/", "550.54.15"); err != nil || len(files) != 0 {
		t.Errorf("empty root: %v, %v; want nothing and no error", files, err)
	}
}

// TestSpecContent writes a claim's spec and reads the file back as a
// container runtime would, checking every edit the shim relies on.
func TestSpecContent(t *testing.T) {
	root := fakeDriverRoot(t, "550.54.15")
	files, _ := cdispec.FindDriverFiles(root, root, "550.54.15")
	spec, err := cdispec.Build(cdispec.Slice{
		ClaimUID: "0b6e4c3a-uid", GPUs: []cdispec.GPU{{UUID: "GPU-abc", Minor: 3}}, MemoryBytes: 8 << 30, Fraction: 25, AccountingDir: "/run/gpuslice/claims/0b6e4c3a-uid",
	}, cdispec.Host{ShimLibrary: "/var/lib/gpuslice/shim/libgpuslice-1a2b.so", PreloadFile: "/var/lib/gpuslice/ld.so.preload", DriverFiles: files, Devices: cdispec.Devices{Simulated: true}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := cdispec.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("0b6e4c3a-uid", spec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(w.Path("0b6e4c3a-uid"))
	if err != nil {
		t.Fatal(err)
	}
	var got specs.Spec
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "gpuslice.dev/claim" || len(got.Devices) != 1 || got.Devices[0].Name != "0b6e4c3a-uid" {
		t.Fatalf("spec kind %q devices %+v", got.Kind, got.Devices)
	}
	if cdispec.DeviceID("0b6e4c3a-uid") != "gpuslice.dev/claim=0b6e4c3a-uid" {
		t.Errorf("device ID %q", cdispec.DeviceID("0b6e4c3a-uid"))
	}
	e := got.Devices[0].ContainerEdits
	for _, env := range []string{"GPUSLICE_MEMORY_LIMIT=8589934592", "GPUSLICE_COMPUTE_SHARE=25", "GPUSLICE_ACCOUNTING_DIR=/run/gpuslice",
		"GPUSLICE_GPU_UUID=GPU-abc", "CUDA_VISIBLE_DEVICES=GPU-abc", "NVIDIA_VISIBLE_DEVICES=GPU-abc"} {
		if !slices.Contains(e.Env, env) {
			t.Errorf("env lacks %s: %v", env, e.Env)
		}
	}
	// Type and numbers in the spec, so a runtime never stats host files a
	// simulated node lacks.
	var nodes []string
	for _, d := range e.DeviceNodes {
		nodes = append(nodes, fmt.Sprintf("%s %s %d:%d", d.Path, d.Type, d.Major, d.Minor))
	}
	if !slices.Equal(nodes, []string{"/dev/nvidia3 c 195:3", "/dev/nvidiactl c 195:255", "/dev/nvidia-uvm c 235:0", "/dev/nvidia-uvm-tools c 235:1"}) {
		t.Errorf("device nodes %v", nodes)
	}
	mounts := map[string]*specs.Mount{}
	for _, m := range e.Mounts {
		mounts[m.ContainerPath] = m
	}
	for path, host := range map[string]string{
		contract.ContainerLibraryPath:            "/var/lib/gpuslice/shim/libgpuslice-1a2b.so",
		contract.ContainerPreloadPath:            "/var/lib/gpuslice/ld.so.preload",
		contract.ContainerAccountingDir:          "/run/gpuslice/claims/0b6e4c3a-uid",
		contract.ContainerLimitsPath:             "/run/gpuslice/claims/0b6e4c3a-uid/gpuslice.limits",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1": filepath.Join(root, "usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"),
		"/usr/bin/nvidia-smi":                    filepath.Join(root, "usr/bin/nvidia-smi"),
	} {
		m := mounts[path]
		if m == nil || m.HostPath != host {
			t.Errorf("mount at %s: %+v, want from %s", path, m, host)
			continue
		}
		ro := slices.Contains(m.Options, "ro")
		if ro != (path != contract.ContainerAccountingDir) {
			t.Errorf("mount at %s options %v: only the accounting dir may be writable", path, m.Options)
		}
	}
	// the limits file on top of the writable directory: mounted after it
	dirAt := slices.IndexFunc(e.Mounts, func(m *specs.Mount) bool { return m.ContainerPath == contract.ContainerAccountingDir })
	limitsAt := slices.IndexFunc(e.Mounts, func(m *specs.Mount) bool { return m.ContainerPath == contract.ContainerLimitsPath })
	if limitsAt < dirAt {
		t.Errorf("the limits file is mounted before the accounting directory (%d < %d): the directory would hide it", limitsAt, dirAt)
	}
	if slices.Contains(e.Env, cdispec.EnvSimState+"="+cdispec.SimStateContainerPath) {
		t.Errorf("a GPU without a simulated state file got %s: %v", cdispec.EnvSimState, e.Env)
	}
	if err := w.Remove("0b6e4c3a-uid"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Path("0b6e4c3a-uid")); !os.IsNotExist(err) {
		t.Errorf("spec still there after Remove: %v", err)
	}
	if err := w.Remove("0b6e4c3a-uid"); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

// On a GPU node the numbers come from the host's device files.
func TestDeviceNumbersFromHost(t *testing.T) {
	dev := t.TempDir()
	// /dev/null (1:3) and /dev/zero (1:5) stand in for the driver's files.
	for name, target := range map[string]string{"nvidia1": "/dev/null", "nvidiactl": "/dev/zero", "nvidia-uvm": "/dev/null", "nvidia-uvm-tools": "/dev/zero"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := cdispec.Devices{Dir: dev}.Nodes(1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		got = append(got, fmt.Sprintf("%s %s %d:%d", n.Path, n.Type, n.Major, n.Minor))
	}
	if want := []string{"/dev/nvidia1 c 1:3", "/dev/nvidiactl c 1:5", "/dev/nvidia-uvm c 1:3", "/dev/nvidia-uvm-tools c 1:5"}; !slices.Equal(got, want) {
		t.Errorf("device nodes %v, want %v", got, want)
	}

	// A node whose driver did not create nvidia-uvm yet: said, with the fix.
	if err := os.Remove(filepath.Join(dev, "nvidia-uvm")); err != nil {
		t.Fatal(err)
	}
	if _, err := (cdispec.Devices{Dir: dev}).Nodes(1); err == nil || !strings.Contains(err.Error(), "nvidia-modprobe -u") {
		t.Errorf("missing nvidia-uvm: error %v, want one naming nvidia-modprobe -u", err)
	}
	// A regular file is not a device.
	if err := os.WriteFile(filepath.Join(dev, "nvidia-uvm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (cdispec.Devices{Dir: dev}).Nodes(1); err == nil || !strings.Contains(err.Error(), "not a character device") {
		t.Errorf("regular file as nvidia-uvm: error %v", err)
	}
}

// Containers on one simulated GPU share its state (the simulated silicon):
// every claim on it, limited or not, gets the GPU's state file, writable.
func TestSimulatedGPUState(t *testing.T) {
	for _, unlimited := range []bool{false, true} {
		spec, err := cdispec.Build(cdispec.Slice{
			ClaimUID: "c", GPUs: []cdispec.GPU{{UUID: "GPU-abc", SimulatedState: "/var/lib/gpuslice/simulated-gpus/GPU-abc.fakegpu"}},
			Unlimited: unlimited, MemoryBytes: 8 << 30, Fraction: 25, AccountingDir: "/run/gpuslice/claims/c",
		}, cdispec.Host{ShimLibrary: "/lib.so", PreloadFile: "/preload", Devices: cdispec.Devices{Simulated: true}})
		if err != nil {
			t.Fatal(err)
		}
		e := spec.Devices[0].ContainerEdits
		if !slices.Contains(e.Env, cdispec.EnvSimState+"="+cdispec.SimStateContainerPath) {
			t.Errorf("unlimited %v: env %v lacks the state file", unlimited, e.Env)
		}
		i := slices.IndexFunc(e.Mounts, func(m *specs.Mount) bool { return m.ContainerPath == cdispec.SimStateContainerPath })
		if i < 0 || e.Mounts[i].HostPath != "/var/lib/gpuslice/simulated-gpus/GPU-abc.fakegpu" || !slices.Contains(e.Mounts[i].Options, "rw") {
			t.Errorf("unlimited %v: mounts %+v lack the GPU's state file, writable", unlimited, e.Mounts)
		}
	}
}
