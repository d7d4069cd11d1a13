package contract

// The in-container enforcement library (libgpuslice.so, built from
// nodeplugin/shim) is configured by the node plugin through these
// environment variables and container paths, and the engine's admission
// policies keep tenants from overriding or mounting over them. The C header
// nodeplugin/shim/include/gpuslice.h carries the same names; a test in
// nodeplugin/shim keeps the two in step.

// Environment variables the library reads, set in each claim's CDI spec.
// The claim's limits are in its limits file (LimitsFile); each variable that
// names a limit may only make it stricter for the process that has it.
const (
	// EnvMemoryLimit is the claim's device-memory budget in bytes (decimal;
	// Ki, Mi, Gi suffixes are accepted).
	EnvMemoryLimit = "GPUSLICE_MEMORY_LIMIT"
	// EnvComputeShare is the claim's share of the GPU's compute time in
	// percent, 1 to 100; 100 or unset turns launch pacing off.
	EnvComputeShare = "GPUSLICE_COMPUTE_SHARE"
	// EnvAccountingDir is the directory holding LimitsFile and RegionFile,
	// shared by every container of the claim; ignored where
	// ContainerLimitsPath exists (a claim's container). Default:
	// ContainerAccountingDir.
	EnvAccountingDir = "GPUSLICE_ACCOUNTING_DIR"
	// EnvComputeBurst, "0", turns off the burst the limits file may allow
	// (using GPU time other processes leave idle); "1" cannot turn it on.
	EnvComputeBurst = "GPUSLICE_COMPUTE_BURST"
	// EnvComputeWindowMS is the pacing window in milliseconds, shorter than
	// the limits file's only: an idle claim may run share% of one window back
	// to back before pacing starts.
	EnvComputeWindowMS = "GPUSLICE_COMPUTE_WINDOW_MS"
	// EnvContextOverhead is the device memory charged for each CUDA context,
	// in bytes, more than the limits file's only.
	EnvContextOverhead = "GPUSLICE_CONTEXT_OVERHEAD"
	// EnvDebug, "1", logs the library's decisions on stderr.
	EnvDebug = "GPUSLICE_DEBUG"
)

// Fixed paths inside a claim's containers.
const (
	// ContainerLibraryDir holds the library; nothing may be mounted over it.
	ContainerLibraryDir = "/usr/local/lib/gpuslice"
	// ContainerLibraryPath is where the node plugin mounts the library. Ship
	// a new version under a new host file (or write, then rename): replacing a
	// mapped library in place breaks the processes that use it.
	ContainerLibraryPath = ContainerLibraryDir + "/libgpuslice.so"
	// ContainerPreloadPath holds one line, ContainerLibraryPath, so that every
	// process in the container loads the library.
	ContainerPreloadPath = "/etc/ld.so.preload"
	// ContainerAccountingDir is where the claim's accounting directory is
	// mounted, read-write: every process of the claim charges its region.
	ContainerAccountingDir = "/run/gpuslice"
	// LimitsFile is the claim's limits file in that directory, written by the
	// node plugin and mounted read-only on its own at ContainerLimitsPath, so
	// no process in the container can change or replace it.
	LimitsFile          = "gpuslice.limits"
	ContainerLimitsPath = ContainerAccountingDir + "/" + LimitsFile
	// RegionFile is the accounting region's file name in that directory:
	// the claim's usage.
	RegionFile = "gpuslice.region"
)

// PreloadFileContent is what ContainerPreloadPath must contain.
const PreloadFileContent = ContainerLibraryPath + "\n"
