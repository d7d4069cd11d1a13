// Package discovery reads what the node plugin needs to know about each GPU
// through NVML. It only ever talks to an nvml.Interface, so the same code
// runs on the real library and on the simulated servers of package simulate.
package discovery

import (
	"errors"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPU is one physical GPU as the plugin publishes and prepares it.
type GPU struct {
	Index int
	UUID  string
	Name  string // NVML name, e.g. "Tesla V100-PCIE-32GB"; the model attribute
	// MemoryBytes is the memory allocations can get: NVML's total less
	// what the driver reserves, where the driver says (MemorySource).
	MemoryBytes  uint64
	MemorySource string // MemoryNVMLv2 or MemoryNVMLv1
	CCMajor      int
	CCMinor      int
	Architecture string // e.g. "Volta"
	// DriverVersion is the kernel driver's version, e.g. "550.54.15";
	// CUDADriverVersion the CUDA version it supports, e.g. "12.4".
	DriverVersion     string
	CUDADriverVersion string
	PCIBusID          string // e.g. "0000:3b:00.0"
	Minor             int    // of /dev/nvidia<Minor>
	// MIGEnabled: the GPU is in MIG mode. It is then offered only as its
	// MIG instances (MIG), never sliced in software.
	MIGEnabled bool
	MIG        []MIGDevice
}

// ComputeCapability returns the capability as a semantic version string,
// e.g. "7.0.0", the form a DRA version attribute takes.
func (g GPU) ComputeCapability() string { return fmt.Sprintf("%d.%d.0", g.CCMajor, g.CCMinor) }

// Skipped is a GPU discovery passed over, with the reason.
type Skipped struct {
	Index  int
	UUID   string // empty when unreadable
	Reason string
}

// Result is what Discover found.
type Result struct {
	GPUs    []GPU
	Skipped []Skipped
}

// Discover lists the GPUs of an initialised NVML library, with the MIG
// instances of those in MIG mode. A GPU that cannot be read is skipped with
// its reason; only a failure to read the node as a whole is an error.
func Discover(lib nvml.Interface) (Result, error) {
	var res Result
	driver, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return res, fmt.Errorf("read the NVIDIA driver version through NVML: %w (is the driver loaded? check nvidia-smi on the node)", ret)
	}
	cudaVersion := ""
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		cudaVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return res, fmt.Errorf("count GPUs through NVML: %w", ret)
	}
	for i := 0; i < count; i++ {
		gpu, err := read(lib, i)
		if err != nil {
			res.Skipped = append(res.Skipped, Skipped{Index: i, UUID: gpu.UUID, Reason: err.Error()})
			continue
		}
		gpu.DriverVersion, gpu.CUDADriverVersion = driver, cudaVersion
		res.GPUs = append(res.GPUs, gpu)
	}
	return res, nil
}

func read(lib nvml.Interface, index int) (GPU, error) {
	g := GPU{Index: index}
	dev, ret := lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("get handle: %w", ret)
	}
	var errs []error
	check := func(what string, ret nvml.Return) {
		if ret != nvml.SUCCESS {
			errs = append(errs, fmt.Errorf("read %s: %w", what, ret))
		}
	}
	g.UUID, ret = dev.GetUUID()
	check("UUID", ret)
	g.Name, ret = dev.GetName()
	check("name", ret)
	mem, err := readMemory(lib, dev)
	if err != nil {
		errs = append(errs, err)
	}
	g.MemoryBytes, g.MemorySource = mem.usable, mem.source
	g.CCMajor, g.CCMinor, ret = dev.GetCudaComputeCapability()
	check("compute capability", ret)
	arch, ret := dev.GetArchitecture()
	check("architecture", ret)
	g.Architecture = ArchitectureName(arch)
	pci, ret := dev.GetPciInfo()
	check("PCI info", ret)
	g.PCIBusID = busID(pci)
	g.Minor, ret = dev.GetMinorNumber()
	check("minor number", ret)
	if err := errors.Join(errs...); err != nil {
		return g, err
	}
	if g.MemoryBytes == 0 {
		return g, errors.New("NVML reports 0 bytes of memory")
	}
	// GPUs without MIG answer NOT_SUPPORTED.
	if current, _, ret := dev.GetMigMode(); ret == nvml.SUCCESS && current == nvml.DEVICE_MIG_ENABLE {
		g.MIGEnabled = true
		var err error
		if g.MIG, err = readMIG(dev, mem.total); err != nil {
			return g, fmt.Errorf("MIG mode is enabled, but its instances cannot be read: %w (check `nvidia-smi mig -lgi` and `nvidia-smi mig -lci` on the node)", err)
		}
	}
	return g, nil
}

func busID(p nvml.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return strings.ToLower(b.String())
}

// ArchitectureName is the name NVIDIA gives an NVML architecture.
func ArchitectureName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "Kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "Maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "Pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "Volta"
	case nvml.DEVICE_ARCH_TURING:
		return "Turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "Ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "Ada"
	case nvml.DEVICE_ARCH_HOPPER:
		return "Hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "Blackwell"
	}
	return "Unknown"
}
