// Package shim is the node plugin's side of the in-container enforcement
// library, libgpuslice.so, built from the C sources in this directory
// (make -C nodeplugin/shim, or make shim from the repository root).
//
// The library is preloaded into every process of a claim's containers
// (through /etc/ld.so.preload), charges every device allocation against the
// claim's memory budget in a shared accounting region, reports the slice as
// the device's memory to CUDA and NVML, and paces kernel launches toward the
// claim's compute share. The node plugin configures it with the environment
// variables and paths below; include/gpuslice.h is the authority for them and
// for the region's layout (package accounting reads the region), and a test
// keeps the two in step.
package shim

// Environment variables the library reads. The node plugin sets them in the
// claim's CDI spec; the admission policies stop tenants from overriding them.
const (
	// EnvMemoryLimit is the claim's device-memory budget in bytes (decimal;
	// Ki, Mi, Gi suffixes are accepted). Required unless the region exists.
	EnvMemoryLimit = "GPUSLICE_MEMORY_LIMIT"
	// EnvComputeShare is the claim's share of the GPU's compute time in
	// percent, 1 to 100; 100 or unset turns launch pacing off.
	EnvComputeShare = "GPUSLICE_COMPUTE_SHARE"
	// EnvAccountingDir is the directory holding RegionFile, shared by every
	// container of the claim. Default: ContainerAccountingDir.
	EnvAccountingDir = "GPUSLICE_ACCOUNTING_DIR"
	// EnvComputeBurst, "1", lets the claim use GPU time other processes leave
	// idle. Default "0": paced to its share even when alone on the GPU.
	EnvComputeBurst = "GPUSLICE_COMPUTE_BURST"
	// EnvComputeWindowMS is the pacing window in milliseconds (default
	// DefaultComputeWindowMS): an idle claim may run share% of one window
	// back to back before pacing starts.
	EnvComputeWindowMS = "GPUSLICE_COMPUTE_WINDOW_MS"
	// EnvContextOverhead is the device memory charged for each CUDA context,
	// in bytes (default DefaultContextOverhead).
	EnvContextOverhead = "GPUSLICE_CONTEXT_OVERHEAD"
	// EnvDebug, "1", logs the library's decisions on stderr.
	EnvDebug = "GPUSLICE_DEBUG"
)

// Defaults the library applies when a variable is unset.
const (
	DefaultContextOverhead = 314572800 // 300 MiB
	DefaultComputeWindowMS = 100
)

// Fixed paths inside the container.
const (
	// ContainerLibraryPath is where the node plugin mounts the library. Ship
	// a new version under a new host file (or write, then rename): replacing a
	// mapped library in place breaks the processes that use it.
	ContainerLibraryPath = "/usr/local/lib/gpuslice/libgpuslice.so"
	// ContainerPreloadPath holds one line, ContainerLibraryPath, so that every
	// process in the container loads the library.
	ContainerPreloadPath = "/etc/ld.so.preload"
	// ContainerAccountingDir is where the claim's accounting directory is
	// mounted; the library falls back to it when EnvAccountingDir is missing
	// (an ssh or su session that dropped the environment).
	ContainerAccountingDir = "/run/gpuslice"
	// RegionFile is the accounting region's file name in that directory.
	RegionFile = "gpuslice.region"
	// LibraryFile is the library's file name in the build output (bin/shim).
	LibraryFile = "libgpuslice.so"
)

// PreloadFileContent is what ContainerPreloadPath must contain.
const PreloadFileContent = ContainerLibraryPath + "\n"
