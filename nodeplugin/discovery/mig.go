package discovery

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// MIGDevice is one existing MIG instance of a GPU in MIG mode (static MIG:
// made beforehand with nvidia-smi mig or NVIDIA's MIG manager): a GPU
// instance and the compute instance inside it, which CUDA sees as one
// device.
type MIGDevice struct {
	UUID        string // the instance's own, "MIG-…"
	Profile     string // NVIDIA's profile name, e.g. "1g.5gb"
	MemoryBytes uint64 // the GPU instance's memory
	// Placement is the GPU instance's first memory slice on its GPU.
	Placement int
	// GPUInstance and ComputeInstance are the instance's ids on its GPU:
	// they name its device nodes (/proc/driver/nvidia-caps/mig-minors).
	GPUInstance     int
	ComputeInstance int
	Multiprocessors int
}

// readMIG lists the MIG devices of a GPU in MIG mode, as a real driver
// answers: each index up to the GPU's maximum holds a device or
// NOT_FOUND; the device's GPU and compute instance give its profile and
// placement. gpuMemory is the whole GPU's memory (profile names round
// the instance's memory against it).
func readMIG(parent nvml.Device, gpuMemory uint64) ([]MIGDevice, error) {
	max, ret := parent.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("read the number of MIG devices: %w", ret)
	}
	var out []MIGDevice
	for i := 0; i < max; i++ {
		h, ret := parent.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("get MIG device %d: %w", i, ret)
		}
		m, err := readMIGDevice(parent, h, gpuMemory)
		if err != nil {
			return nil, fmt.Errorf("MIG device %d: %w", i, err)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b MIGDevice) int {
		return cmp.Or(cmp.Compare(a.Placement, b.Placement), cmp.Compare(a.GPUInstance, b.GPUInstance), cmp.Compare(a.ComputeInstance, b.ComputeInstance))
	})
	return out, nil
}

func readMIGDevice(parent, h nvml.Device, gpuMemory uint64) (MIGDevice, error) {
	var m MIGDevice
	var ret nvml.Return
	if m.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
		return m, fmt.Errorf("read UUID: %w", ret)
	}
	if m.GPUInstance, ret = h.GetGpuInstanceId(); ret != nvml.SUCCESS {
		return m, fmt.Errorf("read GPU instance id: %w", ret)
	}
	if m.ComputeInstance, ret = h.GetComputeInstanceId(); ret != nvml.SUCCESS {
		return m, fmt.Errorf("read compute instance id: %w", ret)
	}
	gi, ret := parent.GetGpuInstanceById(m.GPUInstance)
	if ret != nvml.SUCCESS {
		return m, fmt.Errorf("get GPU instance %d: %w", m.GPUInstance, ret)
	}
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return m, fmt.Errorf("read GPU instance %d: %w", m.GPUInstance, ret)
	}
	giProfile, ret := parent.GetGpuInstanceProfileInfo(int(giInfo.ProfileId))
	if ret != nvml.SUCCESS {
		return m, fmt.Errorf("read GPU instance profile %d: %w", giInfo.ProfileId, ret)
	}
	ci, ret := gi.GetComputeInstanceById(m.ComputeInstance)
	if ret != nvml.SUCCESS {
		return m, fmt.Errorf("get compute instance %d of GPU instance %d: %w", m.ComputeInstance, m.GPUInstance, ret)
	}
	ciInfo, ret := ci.GetInfo()
	if ret != nvml.SUCCESS {
		return m, fmt.Errorf("read compute instance %d: %w", m.ComputeInstance, ret)
	}
	ciProfile, ret := gi.GetComputeInstanceProfileInfo(int(ciInfo.ProfileId), nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		return m, fmt.Errorf("read compute instance profile %d: %w", ciInfo.ProfileId, ret)
	}
	m.Profile = MIGProfileName(giProfile, ciProfile, gpuMemory)
	m.MemoryBytes = giProfile.MemorySizeMB << 20
	m.Placement = int(giInfo.Placement.Start)
	m.Multiprocessors = int(ciProfile.MultiprocessorCount)
	return m, nil
}

// MIGProfileName is NVIDIA's name of a GPU instance profile with a compute
// instance profile, as nvidia-smi and NVIDIA's Kubernetes components
// (go-nvlib) write it: "1g.5gb" when the compute instance fills its GPU
// instance, "1c.2g.10gb" when not, and "+me", "-me", "+me.all", "+gfx" for
// the profile variants with or without media engines or graphics. The
// memory is the profile's share of the GPU rounded up to eighths, times the
// GPU's memory in GB.
func MIGProfileName(gi nvml.GpuInstanceProfileInfo, ci nvml.ComputeInstanceProfileInfo, gpuMemory uint64) string {
	var b strings.Builder
	if ci.SliceCount != gi.SliceCount {
		fmt.Fprintf(&b, "%dc.", ci.SliceCount)
	}
	fmt.Fprintf(&b, "%dg.%dgb", gi.SliceCount, migMemoryGB(gpuMemory, gi.MemorySizeMB))
	switch gi.Id {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		b.WriteString("+me")
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
		b.WriteString("+me.all")
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
		b.WriteString("-me")
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:
		b.WriteString("+gfx")
	}
	return b.String()
}

// migMemoryGB is go-nvlib's rounding: 4864 MiB of a 40 GiB A100 is 5gb.
func migMemoryGB(gpuMemory, profileMB uint64) uint64 {
	const eighths = 8
	if gpuMemory == 0 {
		return 0
	}
	frac := float64(profileMB<<20) / float64(gpuMemory)
	frac = math.Ceil(frac*eighths) / eighths
	totalGB := float64((gpuMemory + 1<<30 - 1) >> 30)
	return uint64(math.Round(frac * totalGB))
}
