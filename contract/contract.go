// Package contract holds the names that the engine (which renders
// DeviceClasses, claims and policies) and the node plugin (which publishes
// devices and prepares claims) must agree on. Both import it, so the two
// sides can never drift apart.
package contract

import (
	"fmt"
	"strings"
)

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
	AttrFraction          = "fraction"          // int, percent of the GPU of a partition: 25, 50, 100; 0 on shared devices
	AttrCUDADriverVersion = "cudaDriverVersion" // version, CUDA version the driver supports, e.g. 12.4.0
	AttrPCIBusID          = "pciBusID"          // string, e.g. "00000000:3b:00.0"
	AttrSharing           = "sharing"           // string, how the device shares its GPU: one of the Sharing* values
	AttrIsolation         = "isolation"         // string, what holds a tenant to its share: one of the Isolation* values
	AttrMemorySource      = "memorySource"      // string, where the GPU's memory (its counter set's) was read: one of the MemorySource* values
	// On MIG devices only (AttrSharing = SharingMIG): AttrUUID is the MIG
	// instance's own UUID ("MIG-…"), AttrModel and AttrIndex are its parent
	// GPU's.
	AttrMIGProfile   = "migProfile"   // string, NVIDIA's profile name, e.g. "1g.5gb"
	AttrParentUUID   = "parentUUID"   // string, UUID of the GPU the instance is cut from
	AttrMIGPlacement = "migPlacement" // int, the GPU instance's placement start slot
)

// How a device shares its GPU: the value of AttrSharing. Every device of
// one GPU consumes that GPU's counter set, so however a node publishes them
// the scheduler never places more than the GPU on it: a device allocated
// several times (AnySize, TimeSliced) charges the counters in full once, at
// its first share, so a GPU serves one kind of sharing at a time.
const (
	// SharingPartition is a fixed fraction of the GPU (AttrFraction), one
	// allocation at a time: the pre-cut slices.
	SharingPartition = "partition"
	// SharingAnySize is the whole GPU as one device allocated many times
	// (DRA consumable capacity): each claim asks for an amount of
	// CapacityMemory and CapacityCompute and is held to what it got.
	SharingAnySize = "any-size"
	// SharingTimeSliced is the whole GPU given to several claims at once,
	// each a number of CapacityShares, with no memory limit and no compute
	// share: the GPU's time slicing alone divides it.
	SharingTimeSliced = "time-sliced"
	// SharingMIG is one existing Multi-Instance GPU instance (static MIG),
	// one allocation at a time. A GPU in MIG mode offers only its MIG
	// devices; a GPU not in MIG mode offers none.
	SharingMIG = "mig"
)

// What holds a tenant to its share of a GPU: the value of AttrIsolation.
const (
	// IsolationSoftware: the preloaded shim refuses memory past the claim's
	// budget and paces kernel launches to its compute share.
	IsolationSoftware = "software"
	// IsolationNone: nothing; every claim sees and may use the whole GPU.
	IsolationNone = "none"
	// IsolationHardware: the GPU itself partitions memory and compute
	// (MIG); no shim is preloaded.
	IsolationHardware = "hardware"
)

// Where the node plugin read a GPU's memory: the value of AttrMemorySource.
// Plugins older than the attribute do not publish it.
const (
	// MemorySourceNVMLv2 is NVML's v2 memory info: the total less what the
	// driver reserves for itself, the memory allocations can get.
	MemorySourceNVMLv2 = "nvml_v2"
	// MemorySourceNVMLv1 is NVML's v1 total, reservation included, from a
	// driver without the v2 call: slices that add up to it may not all
	// fill.
	MemorySourceNVMLv1 = "nvml_v1"
)

// CounterSetPrefix names each GPU's counter set: "gpu-<index>".
const CounterSetPrefix = "gpu-"

// DefaultFractions are the slice sizes a node offers unless configured.
var DefaultFractions = []int{25, 50, 100}

// Whether a node offers every GPU as an any-size and as a time-sliced
// device unless configured (the node plugin's --any-size and
// --time-slicing).
const (
	DefaultAnySize     = false
	DefaultTimeSlicing = false
)

// Capacity and counter names. Each GPU has one CounterSet with both
// counters; each partition consumes its fraction of them, so the scheduler
// never places slices adding up to more than the GPU.
const (
	CapacityMemory  = "memory"  // bytes
	CapacityCompute = "compute" // percent of the GPU's compute
	ComputeWhole    = 100
	// CapacityShares is the time-sliced device's capacity: TimeSliceShares
	// in all, of which a package of N replicas per GPU asks SharesOf(N).
	CapacityShares = "shares"
)

// MemoryStep is the granularity of an any-size device's memory: requests
// are whole multiples of it (the scheduler rounds any other amount up).
const MemoryStep = 256 << 20

// TimeSliceShares is what a time-sliced device has in all. It is large so
// that N requests of SharesOf(N) fit exactly N times for any N up to
// MaxTimeSliceReplicas (N·(N+1) < TimeSliceShares), and packages of
// different N can share one GPU.
const TimeSliceShares = 1_000_000

// MaxTimeSliceReplicas bounds a time-sliced package's replicas per GPU.
const MaxTimeSliceReplicas = 64

// SharesOf is the CapacityShares one claim of a package of n replicas per
// GPU asks for.
func SharesOf(n int) int64 { return TimeSliceShares / int64(n) }

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

// MIGDeviceName names the DRA device of a MIG instance: its parent GPU's
// index, its profile and its placement, so the name stays the same across
// plugin restarts and says what it is ("gpu-0-mig-1g-5gb-3"). Profile
// characters a device name may not hold ('.', '+') become '-'.
func MIGDeviceName(gpuIndex int, profile string, placement int) string {
	p := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, profile)
	return fmt.Sprintf("%s%d-mig-%s-%d", CounterSetPrefix, gpuIndex, p, placement)
}

// TaintUnhealthy is the key of the taint the node plugin puts on every
// device of a GPU the driver reports failing (its value is the reason, e.g.
// xid-79); DeviceTaintRules and tolerations name it.
const TaintUnhealthy = "gpuslice.dev/unhealthy"

// HealthClearedPrefix begins the Node annotation by which an operator
// (`gpuslice gpu clear`) tells the node plugin that a GPU it found failing
// is healthy again, without waiting for the recovery time. The key is the
// prefix and the GPU's UUID, the value the time of the clear (RFC 3339,
// nanoseconds): the plugin clears only faults from before it, so a fault
// after the clear is never hidden. It lives on the Node because tenants
// cannot write Nodes: a clear is never a tenant's.
const HealthClearedPrefix = "gpuslice.dev/health-cleared-"

// HealthClearedAnnotation is the annotation key of a clear of the GPU with
// this UUID (GPU-…, 40 characters: the key's name part stays within the 63
// an annotation allows).
func HealthClearedAnnotation(gpuUUID string) string { return HealthClearedPrefix + gpuUUID }

// HealthClearedGPU is the UUID of the GPU an annotation key clears, and
// whether it is such a key.
func HealthClearedGPU(key string) (string, bool) {
	uuid, ok := strings.CutPrefix(key, HealthClearedPrefix)
	return uuid, ok && uuid != ""
}

// What a GitOps runner (tofu-controller's tf-runner, Atlantis, a CI job,
// the in-cluster reconcile) is granted to apply gpuslice stacks: the
// ClusterRole of what gpuslice creates and reads, and the Role, in the
// runner's own namespace, of OpenTofu's kubernetes backend (its state
// Secret and lock Lease).
const (
	RunnerRole      = "gpuslice-runner"
	RunnerStateRole = "gpuslice-runner-state"
)
