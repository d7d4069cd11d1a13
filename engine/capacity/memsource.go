package capacity

import (
	"cmp"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpuslice/gpuslice/contract"
)

// MemorySourceUnknown is a GPU's MemorySource when its devices do not say
// (a node plugin older than contract.AttrMemorySource; those older than
// NVML's v2 memory info published the v1 total, reservation included).
const MemorySourceUnknown = "unknown"

// memorySource is where the node plugin read the memory of a device's GPU:
// contract.MemorySourceNVMLv2, contract.MemorySourceNVMLv1 or
// MemorySourceUnknown.
func memorySource(d resourcev1.Device) string {
	return cmp.Or(str(d.Attributes[contract.AttrMemorySource]), MemorySourceUnknown)
}
