// Package maintenance cordons GPUs for maintenance: `gpuslice gpu drain`
// taints every device a GPU (or a node's GPUs) publishes with
// DeviceTaintRules, the Kubernetes object the scheduler and the device
// taint eviction controller honour, so that no state of gpuslice's own
// says a GPU is drained; `gpuslice gpu undrain` deletes the rules.
package maintenance

import (
	"fmt"
	"strings"
)

// Target is what to drain: a node's GPUs, or one of them.
type Target struct {
	Node string
	// GPU is the GPU's NVML index on the node or its UUID; empty means
	// every GPU of the node.
	GPU string
}

// ParseTarget reads NODE or NODE/GPU.
func ParseTarget(s string) (Target, error) {
	node, gpu, slash := strings.Cut(s, "/")
	if node == "" || (slash && gpu == "") || strings.Contains(gpu, "/") {
		return Target{}, fmt.Errorf("target %q: want NODE or NODE/GPU, GPU being the GPU's index on the node (0, 1, …) or its UUID", s)
	}
	return Target{Node: node, GPU: gpu}, nil
}

func (t Target) String() string {
	if t.GPU == "" {
		return t.Node
	}
	return t.Node + "/" + t.GPU
}
