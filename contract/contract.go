// Package contract holds the names that the engine (which renders
// DeviceClasses, claims and policies) and the node plugin (which publishes
// devices and prepares claims) must agree on. Both import it, so the two
// sides can never drift apart.
package contract

// DriverName is the DRA driver name: devices, device classes and CEL
// selectors all refer to it.
const DriverName = "gpuslice.dev"

// Device attribute names published on every slice device. In CEL they read
// device.attributes["gpuslice.dev"].<name>.
const (
	AttrModel             = "model"             // string, NVML name, e.g. "Tesla V100-PCIE-32GB"
	AttrUUID              = "uuid"              // string, UUID of the physical GPU
	AttrIndex             = "index"             // int, NVML index on the node
	AttrComputeCapability = "computeCapability" // version, e.g. 7.0.0
	AttrArchitecture      = "architecture"      // string, e.g. "Volta"
	AttrDriverVersion     = "driverVersion"     // string, e.g. "580.95.05"
	AttrFraction          = "fraction"          // int, percent of the GPU: 25, 50, 100
	AttrCUDADriverVersion = "cudaDriverVersion" // version, CUDA version the driver supports, e.g. 12.4.0
	AttrPCIBusID          = "pciBusID"          // string, e.g. "00000000:3b:00.0"
)

// CounterSetPrefix names each GPU's counter set: "gpu-<index>".
const CounterSetPrefix = "gpu-"

// DefaultFractions are the slice sizes a node offers unless configured.
var DefaultFractions = []int{25, 50, 100}

// Capacity and counter names. Each GPU has one CounterSet with both
// counters; each slice device consumes its fraction of them, so the
// scheduler never places slices adding up to more than the GPU.
const (
	CapacityMemory  = "memory"  // bytes
	CapacityCompute = "compute" // percent of the GPU's compute
	ComputeWhole    = 100
)

// Labels gpuslice puts on the objects it renders.
const (
	// LabelPackage names the package (device class) a claim template uses.
	LabelPackage = "gpuslice.dev/package"
	// LabelTenant marks namespaces where tenants run workloads; the admission
	// policies apply there only.
	LabelTenant = "gpuslice.dev/tenant"
	// LabelManagedBy is the standard ownership label; its value is ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "gpuslice"
)

// Environment a tenant container may not set: the node plugin sets these to
// confine a container to its slice, the engine refuses them in a workload
// and the admission policies refuse them in any pod of a tenant namespace.
var (
	ReservedEnvNames = []string{
		"LD_PRELOAD", "LD_AUDIT", // load or unhook libraries around the shim
		"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", // pick GPUs
		"NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES", // NVIDIA container runtime device injection
	}
	ReservedEnvPrefixes = []string{"GPUSLICE_", "CUDA_MPS_"}
)

// ReservedEnv reports whether a container may not set the variable name.
func ReservedEnv(name string) bool {
	for _, n := range ReservedEnvNames {
		if name == n {
			return true
		}
	}
	for _, p := range ReservedEnvPrefixes {
		if len(name) >= len(p) && name[:len(p)] == p {
			return true
		}
	}
	return false
}
