package cdispec_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
)

// procRoot writes the driver's two files as a host with an A100 in MIG mode
// has them (majors differ per host; nvidia-caps-imex-channels must not be
// taken for nvidia-caps).
func procRoot(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "driver", "nvidia-caps"), 0o755)
	os.WriteFile(filepath.Join(dir, "devices"), []byte("Character devices:\n  1 mem\n195 nvidia\n195 nvidiactl\n234 nvidia-caps-imex-channels\n"+
		"235 nvidia-uvm\n237 nvidia-caps\n\nBlock devices:\n237 not-this-one\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "driver", "nvidia-caps", "mig-minors"), []byte("config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n"+
		"gpu0/gi3/access 30\ngpu0/gi3/ci0/access 31\ngpu0/gi3/ci1/access 32\ngpu1/gi3/access 165\ngpu1/gi3/ci0/access 166\n"), 0o644)
	return dir
}

// A MIG claim's spec: the parent's device node, the driver's, and the GPU
// and compute instance's capability nodes with the driver's numbers; the
// MIG UUID as the visible device; no shim, preload, accounting or limit.
func TestMIGSpec(t *testing.T) {
	proc := procRoot(t)
	root := fakeDriverRoot(t, "550.54.15")
	files, _ := cdispec.FindDriverFiles(root, root, "550.54.15")
	host := cdispec.Host{ShimLibrary: "/var/lib/gpuslice/shim/libgpuslice-1a2b.so", PreloadFile: "/var/lib/gpuslice/ld.so.preload", DriverFiles: files,
		Devices: cdispec.Devices{Simulated: true, ProcDir: proc}}
	slice := cdispec.Slice{ClaimUID: "mig-uid", GPUs: []cdispec.GPU{{UUID: "GPU-parent", Minor: 1, Model: "NVIDIA A100-SXM4-40GB", ComputeCapability: "8.0"}},
		MIG: &cdispec.MIG{UUID: "MIG-abc", Profile: "1g.5gb", MemoryBytes: 4864 << 20, GPUInstance: 3, ComputeInstance: 0}}
	spec, err := cdispec.Build(slice, host)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cdispec.NewWriter(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("mig-uid", spec); err != nil {
		t.Fatalf("the runtime's CDI library refuses the spec: %v", err)
	}
	e := spec.Devices[0].ContainerEdits
	var nodes []string
	for _, d := range e.DeviceNodes {
		nodes = append(nodes, fmt.Sprintf("%s %s %d:%d", d.Path, d.Type, d.Major, d.Minor))
	}
	want := []string{"/dev/nvidia1 c 195:1", "/dev/nvidiactl c 195:255", "/dev/nvidia-uvm c 235:0", "/dev/nvidia-uvm-tools c 235:1",
		"/dev/nvidia-caps/nvidia-cap165 c 237:165", "/dev/nvidia-caps/nvidia-cap166 c 237:166"}
	if !slices.Equal(nodes, want) {
		t.Errorf("device nodes %v\nwant %v", nodes, want)
	}
	for _, env := range []string{"CUDA_VISIBLE_DEVICES=MIG-abc", "NVIDIA_VISIBLE_DEVICES=MIG-abc", "GPUSLICE_GPU_UUID=GPU-parent",
		"FAKEGPU_MIG_PROFILE=1g.5gb", "FAKEGPU_MIG_MEMORY=5100273664", "FAKEGPU_NAME=NVIDIA A100-SXM4-40GB", "FAKEGPU_COMPUTE_CAPABILITY=8.0"} {
		if !slices.Contains(e.Env, env) {
			t.Errorf("env lacks %s: %v", env, e.Env)
		}
	}
	for _, env := range e.Env {
		if strings.HasPrefix(env, contract.EnvMemoryLimit) || strings.HasPrefix(env, contract.EnvComputeShare) || strings.HasPrefix(env, contract.EnvAccountingDir) {
			t.Errorf("a MIG claim is limited in software: %s", env)
		}
	}
	for _, m := range e.Mounts {
		if m.ContainerPath == contract.ContainerLibraryPath || m.ContainerPath == contract.ContainerPreloadPath || m.ContainerPath == contract.ContainerAccountingDir {
			t.Errorf("a MIG claim mounts %s", m.ContainerPath)
		}
	}
	if len(e.Mounts) != len(files) {
		t.Errorf("mounts %d, want the driver's %d files", len(e.Mounts), len(files))
	}

	// A real node's spec tells the driver nothing: it knows its hardware.
	host.Devices.Simulated = false
	host.Devices.Dir = devDir(t)
	spec, err = cdispec.Build(slice, host)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range spec.Devices[0].ContainerEdits.Env {
		if strings.HasPrefix(env, "FAKEGPU_") {
			t.Errorf("a real GPU's spec carries %s", env)
		}
	}
}

// Missing driver files and instances say what is wrong.
func TestMIGNodesErrors(t *testing.T) {
	proc := procRoot(t)
	if _, err := (cdispec.Devices{ProcDir: proc}).MIGNodes(0, 5, 0); err == nil || !strings.Contains(err.Error(), "lists no gpu0/gi5/access") {
		t.Errorf("unknown GPU instance: %v", err)
	}
	if _, err := (cdispec.Devices{ProcDir: t.TempDir()}).MIGNodes(0, 3, 0); err == nil || !strings.Contains(err.Error(), "is the NVIDIA driver loaded") {
		t.Errorf("no driver files: %v", err)
	}
	os.WriteFile(filepath.Join(proc, "devices"), []byte("Character devices:\n195 nvidia\n"), 0o644)
	if _, err := (cdispec.Devices{ProcDir: proc}).MIGNodes(0, 3, 0); err == nil || !strings.Contains(err.Error(), "has no nvidia-caps character device") {
		t.Errorf("no nvidia-caps: %v", err)
	}
}

// devDir has the GPU's device files, as a real node does.
func devDir(t *testing.T) string {
	dev := t.TempDir()
	for _, name := range []string{"nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"} {
		if err := os.Symlink("/dev/null", filepath.Join(dev, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dev
}
