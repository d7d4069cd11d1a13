package cdispec

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The driver's user-space files are found by this small search rather than
// NVIDIA's nvidia-container-toolkit (pkg/nvcdi): that module pulls in a
// large dependency tree (the toolkit's whole config, hooks and runtime
// packages), insists on a real driver root with a working libnvidia-ml, and
// generates one spec per GPU for every container, while a gpuslice claim
// needs a per-claim spec with the shim and limits added. What a CUDA or NVML
// program needs is a short, stable list: the libraries below and nvidia-smi.

// driverLibraries are the libraries a CUDA or NVML program loads.
var driverLibraries = []string{
	"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so",
	"libnvidia-gpucomp.so", "libnvidia-allocator.so", "libnvidia-cfg.so", "libcudadebugger.so",
	"libnvidia-opencl.so",
}

// libraryDirs are where distributions install the driver's libraries.
var libraryDirs = []string{
	"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu", "/lib/x86_64-linux-gnu", "/lib64", "/usr/lib",
}

// driverBinaries are the tools mounted into containers.
var driverBinaries = []string{"/usr/bin/nvidia-smi"}

// DriverFile is one file to mount: HostPath on the node, ContainerPath
// inside the container.
type DriverFile struct {
	HostPath      string
	ContainerPath string
}

// FindDriverFiles lists the driver's libraries of version driverVersion
// (e.g. libcuda.so.550.54.15) and nvidia-smi. hostRoot is the host directory
// holding the driver's files ("/" for a driver installed on the host,
// /run/nvidia/driver for NVIDIA's driver container), the root of the host
// paths in the spec; root is where the plugin sees that directory (the
// plugin's container mounts it elsewhere). Each library is mounted
// under its own name and under its ELF soname (libcuda.so.1), the name
// programs open, so no ldconfig or symlink hook is needed in the container.
// Missing files are skipped: a simulated node has none.
func FindDriverFiles(root, hostRoot, driverVersion string) ([]DriverFile, error) {
	var out []DriverFile
	seen := map[string]bool{}
	for _, dir := range libraryDirs {
		for _, lib := range driverLibraries {
			name := lib + "." + driverVersion
			path := filepath.Join(root, dir, name)
			host := filepath.Join(hostRoot, dir, name)
			if _, err := os.Stat(path); err != nil {
				continue
			}
			if seen[name] {
				continue // the first directory wins, as for the dynamic loader
			}
			seen[name] = true
			out = append(out, DriverFile{HostPath: host, ContainerPath: filepath.Join(dir, name)})
			soname, err := readSoname(path)
			if err != nil {
				return nil, fmt.Errorf("driver library %s: %w (is %s the driver's root?)", path, err, root)
			}
			if soname != "" && soname != name {
				out = append(out, DriverFile{HostPath: host, ContainerPath: filepath.Join(dir, soname)})
			}
		}
	}
	for _, bin := range driverBinaries {
		if _, err := os.Stat(filepath.Join(root, bin)); err == nil {
			out = append(out, DriverFile{HostPath: filepath.Join(hostRoot, bin), ContainerPath: bin})
		}
	}
	slices.SortStableFunc(out, func(a, b DriverFile) int { return strings.Compare(a.ContainerPath, b.ContainerPath) })
	return out, nil
}

func readSoname(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("read ELF header: %w", err)
	}
	defer f.Close()
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil {
		return "", fmt.Errorf("read soname: %w", err)
	}
	if len(names) == 0 {
		return "", nil
	}
	return names[0], nil
}
