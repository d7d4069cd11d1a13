// Package shim is the node plugin's side of the in-container enforcement
// library, libgpuslice.so, built from the C sources in this directory
// (make -C nodeplugin/shim, or make shim from the repository root).
//
// The library is preloaded into every process of a claim's containers
// (through /etc/ld.so.preload), charges every device allocation against the
// claim's memory budget in a shared accounting region, reports the slice as
// the device's memory to CUDA and NVML, and paces kernel launches toward the
// claim's compute share. The node plugin configures it with the environment
// variables and container paths in package contract; include/gpuslice.h is the authority for them and
// for the region's layout (package accounting reads the region), and a test
// keeps the two in step.
package shim

// Defaults the library applies when a variable is unset.
const (
	DefaultContextOverhead = 314572800 // 300 MiB
	DefaultComputeWindowMS = 100
)

// LibraryFile is the library's file name in the build output (bin/shim).
const LibraryFile = "libgpuslice.so"
