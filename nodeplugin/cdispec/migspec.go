package cdispec

import (
	"fmt"
	"strconv"

	specs "tags.cncf.io/container-device-interface/specs-go"
)

// What a simulated driver (the fake libcuda and libnvidia-ml of the local
// cluster) is told of a MIG claim's hardware, which a real driver knows
// itself: the parent GPU and the instance's profile and memory. Only specs
// of simulated GPUs carry them.
const (
	EnvSimGPUName    = "FAKEGPU_NAME"
	EnvSimGPUUUID    = "FAKEGPU_UUID"
	EnvSimGPUCC      = "FAKEGPU_COMPUTE_CAPABILITY"
	EnvSimMIGUUID    = "FAKEGPU_MIG_UUID"
	EnvSimMIGProfile = "FAKEGPU_MIG_PROFILE"
	EnvSimMIGMemory  = "FAKEGPU_MIG_MEMORY"
)

// The state of a simulated GPU (its memory and the processes holding it),
// which the fake driver in every container on the GPU shares, as the
// containers on a real GPU share its memory: the host's state file of the
// GPU, mounted read-write, and the fake's variable naming it. In /dev, as a
// real GPU's device nodes are: a process that renames a directory of its
// own does not take the silicon away with it. A MIG instance's container
// has none: its memory is the instance's own.
const (
	EnvSimState           = "FAKEGPU_STATE"
	SimStateContainerPath = "/dev/gpuslice-simulated-gpu"
)

// buildMIG is the spec of a MIG claim: the parent's device node and the
// driver's, the instance's two capability nodes, the driver's files, and
// the MIG UUID as the visible device. No shim, preload or accounting: the
// hardware holds the claim to its instance.
func buildMIG(s Slice, h Host) (*specs.Spec, error) {
	if len(s.GPUs) != 1 {
		return nil, fmt.Errorf("CDI spec of claim %s: a MIG instance is on one GPU, not %d", s.ClaimUID, len(s.GPUs))
	}
	g, m := s.GPUs[0], s.MIG
	edits := specs.ContainerEdits{Env: []string{
		EnvGPUUUID + "=" + g.UUID,
		"CUDA_VISIBLE_DEVICES=" + m.UUID,
		"NVIDIA_VISIBLE_DEVICES=" + m.UUID,
	}}
	if h.Devices.Simulated {
		edits.Env = append(edits.Env,
			EnvSimGPUName+"="+g.Model, EnvSimGPUUUID+"="+g.UUID, EnvSimGPUCC+"="+g.ComputeCapability, EnvSimMIGUUID+"="+m.UUID,
			EnvSimMIGProfile+"="+m.Profile, EnvSimMIGMemory+"="+strconv.FormatUint(m.MemoryBytes, 10))
	}
	nodes, err := h.Devices.Nodes(g.Minor)
	if err != nil {
		return nil, fmt.Errorf("CDI spec of claim %s: %w", s.ClaimUID, err)
	}
	caps, err := h.Devices.MIGNodes(g.Minor, m.GPUInstance, m.ComputeInstance)
	if err != nil {
		return nil, fmt.Errorf("CDI spec of claim %s (MIG %s on GPU %s): %w", s.ClaimUID, m.UUID, g.UUID, err)
	}
	edits.DeviceNodes = append(nodes, caps...)
	return finish(s.ClaimUID, edits, h)
}
