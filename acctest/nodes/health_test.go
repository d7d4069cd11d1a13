package nodes

import (
	"testing"

	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// An XID written to the simulated driver's fault log on a real node (kubelet,
// containerd, runc, two simulated V100s offering partitions, an any-size and
// a time-sliced device each) taints every device of the GPU with the running
// 25 % pod, and the kubelet shows that pod's device Unhealthy, naming the
// XID; four new 25 % pods all land on the other GPU and a fifth waits, though
// the failing GPU has room; once the GPU is quiet for --health-recovery the
// taint goes, the fifth pod lands there and the running pod's device is
// Healthy again.
func TestXIDTaintsGPUOnRealNode(t *testing.T) {
	faultCase{
		gpus: "v100-32gb:2", args: []string{"--any-size=true", "--time-slicing=true"},
		pkg: &spec.Package{Name: "health-v100-25pct", GPUModel: simulate.V100PCIe32GB.Name, Fraction: 25}, request: "gpu",
		fault: "xid %d 79", reason: "xid-79", message: "critical XID 79",
		devices: 4 + 2 + 1 + 2, // quarters, halves, the whole GPU, the any-size and the time-sliced device
		others:  4,
	}.run(t, "real-health", "health")
}

// The same on two simulated A100s in MIG mode (two 1g.5gb and a 3g.20gb
// instance each): an XID on the GPU of a running 1g.5gb pod taints its three
// MIG devices and none of the other GPU's, the kubelet shows the pod's
// instance Unhealthy, two new 1g.5gb pods land on the other GPU and a third
// waits for the failing GPU's free instance, which it gets after recovery.
func TestXIDTaintsMIGGPUOnRealNode(t *testing.T) {
	faultCase{
		gpus: "a100-40gb:2,mig=1g.5gb*2,3g.20gb",
		pkg:  &spec.Package{Name: "health-a100-1g-5gb", GPUModel: simulate.A100SXM440GB.Name, MIGProfile: "1g.5gb"}, request: "gpu",
		fault: "xid %d 48", reason: "xid-48", message: "critical XID 48",
		devices: 3, others: 2,
	}.run(t, "real-health-mig", "health-mig")
}

// The same for a time-sliced package (two slices per GPU), whose claims
// share one device, and a double-bit ECC error: the GPU's 8 devices are
// tainted, the running pod's shared device shows Unhealthy, two new pods
// take the other GPU's slices and a third waits for the failing GPU's free
// slice, which it gets after recovery.
func TestECCTaintsTimeSlicedGPUOnRealNode(t *testing.T) {
	faultCase{
		gpus: "v100-32gb:2", args: []string{"--time-slicing=true"},
		pkg:   &spec.Package{Name: "health-v100-ts", GPUModel: simulate.V100PCIe32GB.Name, Sharing: spec.SharingTimeSliced, Replicas: 2},
		fault: "ecc %d", reason: "ecc-double-bit", message: "uncorrectable",
		devices: 4 + 2 + 1 + 1, // quarters, halves, the whole GPU, the time-sliced device
		others:  2,
	}.run(t, "real-health-ts", "health-ts")
}

// The same for an any-size package (16 GiB/50 %) and a GPU that falls off
// the bus: the plugin's next reading of it taints its 8 devices, the running
// pod's device shows Unhealthy, two new pods fill the other GPU and a third
// waits for the lost GPU's room, which it gets once the GPU answers again
// and stays quiet for the recovery time.
func TestLostGPUTaintsAnySizeOnRealNode(t *testing.T) {
	faultCase{
		gpus: "v100-32gb:2", args: []string{"--any-size=true"},
		pkg:   &spec.Package{Name: "health-v100-16gi", GPUModel: simulate.V100PCIe32GB.Name, Memory: "16Gi", ComputeShare: 50, MemoryBytes: 16 << 30},
		fault: "lost %d", heal: "found %d", reason: "gpu-lost", message: "fell off the bus",
		devices: 4 + 2 + 1 + 1, // quarters, halves, the whole GPU, the any-size device
		others:  2,
	}.run(t, "real-health-any", "health-any")
}
