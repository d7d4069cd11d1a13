// Package simulate builds NVML servers with simulated GPUs on go-nvml's
// mock framework, for the local control plane, the demo and the tests. It
// adds the V100 profiles go-nvml does not ship (it has A100 and newer), and
// for A100 and H100 in MIG mode what go-nvml's mock lacks (MIG device
// handles and UUIDs, mig.go) and the driver's /proc files that name the MIG
// device nodes (procfiles.go).
package simulate

import (
	"crypto/sha256"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Volta V100 32 GB cards: compute capability 7.0, no MIG.
var (
	V100PCIe32GB = gpus.Config{
		Name: "Tesla V100-PCIE-32GB", Architecture: nvml.DEVICE_ARCH_VOLTA, Brand: nvml.BRAND_TESLA,
		MemoryMB: 32768, CudaMajor: 7, CudaMinor: 0, PciDeviceId: 0x1DB610DE,
	}
	V100SXM232GB = gpus.Config{
		Name: "Tesla V100-SXM2-32GB", Architecture: nvml.DEVICE_ARCH_VOLTA, Brand: nvml.BRAND_TESLA,
		MemoryMB: 32768, CudaMajor: 7, CudaMinor: 0, PciDeviceId: 0x1DB510DE,
	}
)

// A100SXM440GB is go-nvml's A100 40 GB under the name NVML gives the real
// card (the mock prefixes "Mock ").
var A100SXM440GB = func() gpus.Config {
	c := gpus.A100_SXM4_40GB
	c.Name = "NVIDIA A100-SXM4-40GB"
	return c
}()

// Profiles names the simulated cards for --simulate.
var Profiles = map[string]gpus.Config{
	"v100-32gb":      V100PCIe32GB, // the card of the field test
	"v100-pcie-32gb": V100PCIe32GB,
	"v100-sxm2-32gb": V100SXM232GB,
	"a100-40gb":      A100SXM440GB,
	"a100-sxm4-40gb": A100SXM440GB,
	"a100-sxm4-80gb": gpus.A100_SXM4_80GB,
	"h100-80gb":      gpus.H100_SXM5_80GB,
}

// Driver the simulated node reports: a 550 driver (CUDA 12.4), the first
// that loads compressed kernels, as current images need.
const (
	DriverVersion     = "550.54.15"
	NVMLVersion       = "12.550.54.15"
	CUDADriverVersion = 12040
)

// Busy is what a simulated GPU reports to the metrics: fixed values, so a
// scrape shows the DCGM-style series with plausible numbers.
const (
	SimUtilizationPercent = 0
	SimTemperatureC       = 34
	SimPowerMilliwatts    = 26000
)

// New returns a simulated node: spec.Count GPUs whose UUIDs and PCI bus ids
// derive from seed (use the node name), so two simulated nodes differ and a
// restarted plugin sees the same GPUs. It panics on a spec ParseSpec would
// refuse (tests write specs by hand; the command parses them).
func New(spec Spec, seed string) *server.Server {
	s, err := NewNode([]Spec{spec}, seed)
	if err != nil {
		panic(err)
	}
	return s
}

// NewNode returns a simulated node with the GPUs of every spec, indexed in
// order: a mixed node, e.g. one A100 in MIG mode beside one that is not.
func NewNode(specs []Spec, seed string) (*server.Server, error) {
	var devices []nvml.Device
	var gpus []*server.Device
	var migs []*migDevice
	for _, spec := range specs {
		cfg, ok := Profiles[spec.Profile]
		if !ok {
			return nil, fmt.Errorf("simulated GPUs %q: unknown GPU profile %q", spec, spec.Profile)
		}
		for range spec.Count {
			d := newDevice(cfg, len(devices), seed)
			if len(spec.MIG) > 0 {
				m, err := enableMIG(d, spec.MIG, seed)
				if err != nil {
					return nil, fmt.Errorf("simulated GPUs %q: %w", spec, err)
				}
				migs = append(migs, m...)
			}
			devices = append(devices, d)
			gpus = append(gpus, d)
		}
	}
	s := &server.Server{Devices: devices, DriverVersion: DriverVersion, NvmlVersion: NVMLVersion, CudaDriverVersion: CUDADriverVersion}
	s.SetMockFuncs()
	attachFaults(s, gpus)
	// NVML finds MIG devices by their UUIDs too.
	byUUID := s.DeviceGetHandleByUUIDFunc
	s.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		for _, m := range migs {
			if m.uuid == uuid {
				return m, nvml.SUCCESS
			}
		}
		return byUUID(uuid)
	}
	return s, nil
}

// busNumbers are PCI buses of GPUs in a typical two-socket server.
var busNumbers = []int{0x3b, 0x5e, 0x86, 0xaf, 0x18, 0x1c, 0xd8, 0xdb, 0x04, 0x07, 0x0a, 0x0d, 0x41, 0x44, 0x47, 0x4a}

func newDevice(cfg gpus.Config, index int, seed string) *server.Device {
	d := server.NewDeviceFromConfig(cfg, index)
	d.UUID = stableUUID(seed, index)
	d.PciBusID = fmt.Sprintf("00000000:%02X:00.0", busNumbers[index%len(busNumbers)])
	d.MemoryInfo = nvml.Memory{Total: cfg.MemoryMB << 20, Free: cfg.MemoryMB << 20}
	// The v2 call of the drivers since R510, which go-nvml's mock lacks: v1
	// as it answers now (a test may make it fail), with nothing reserved,
	// so a simulated card offers all of its memory, as the examples' sizes
	// assume.
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		m, ret := d.GetMemoryInfo()
		return nvml.Memory_v2{Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2), Total: m.Total, Free: m.Free, Used: m.Used}, ret
	}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p := nvml.PciInfo{PciDeviceId: cfg.PciDeviceId, Bus: uint32(busNumbers[index%len(busNumbers)])}
		for i, c := range []byte(d.PciBusID) {
			p.BusId[i] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	if len(cfg.MIGProfiles.GpuInstanceProfiles) == 0 {
		// Volta has no MIG: real NVML answers NOT_SUPPORTED.
		d.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	}
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: SimUtilizationPercent}, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return SimTemperatureC, nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return SimPowerMilliwatts, nvml.SUCCESS }
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	return d
}

// stableUUID formats a hash of seed and index as an NVIDIA GPU UUID.
func stableUUID(seed string, index int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("gpuslice-sim/%s/%d", seed, index)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
