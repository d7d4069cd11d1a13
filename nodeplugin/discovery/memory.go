package discovery

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuslice/gpuslice/contract"
)

// Where a GPU's memory was read (GPU.MemorySource): the values the plugin
// publishes as the devices' contract.AttrMemorySource.
const (
	MemoryNVMLv2 = contract.MemorySourceNVMLv2
	MemoryNVMLv1 = contract.MemorySourceNVMLv1
)

// memory is what NVML says of a GPU's memory: usable is what the plugin
// publishes, total the board's (MIG profile names are derived from it).
type memory struct {
	usable, total uint64
	source        string
}

// readMemory reads the GPU's memory through v2 where the driver has it,
// and v1's total where it does not. A library without the v2 symbol is
// never called through it: go-nvml would call a function that is not there.
func readMemory(lib nvml.Interface, dev nvml.Device) (memory, error) {
	if lib.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil {
		m, ret := dev.GetMemoryInfo_v2()
		switch ret {
		case nvml.SUCCESS:
			if m.Reserved >= m.Total {
				return memory{}, fmt.Errorf("NVML's v2 memory info reserves %d of %d bytes: nothing is left for slices", m.Reserved, m.Total)
			}
			return memory{usable: m.Total - m.Reserved, total: m.Total, source: MemoryNVMLv2}, nil
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
		default:
			return memory{}, fmt.Errorf("read memory (v2): %w", ret)
		}
	}
	m, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return memory{}, fmt.Errorf("read memory: %w", ret)
	}
	return memory{usable: m.Total, total: m.Total, source: MemoryNVMLv1}, nil
}
