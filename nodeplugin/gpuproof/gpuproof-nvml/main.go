// Command gpuproof-nvml is the Go half of make gpu-proof: the node plugin's
// own discovery, the ResourceSlices it would publish, its NVML process
// accounting and its enforcer, run on whatever libnvidia-ml.so.1 the machine
// loads (the real one on a GPU machine, the simulated one of
// nodeplugin/shim/fake in make test). It prints JSON for
// nodeplugin/gpuproof/gpu_proof.py.
//
//	gpuproof-nvml discover [--node NAME] [--fractions 25,50,100]
//	gpuproof-nvml processes
//	gpuproof-nvml enforce --limit BYTES [--limits-file PATH]
//
// enforce runs the node plugin's enforcer (nodeplugin/enforce) over one
// claim of BYTES on every GPU whose processes are the PIDs given on stdin
// ("pid N" lines; processes outside pods, so the harness says which form
// the claim), writing its observation into the claim's limits file. It
// prints a JSON line for each process it stops and, once stdin closes, one
// with its sampling cost.
//
// GPU machines have no Go: build it with make gpu-proof-bin and carry
// bin/gpu-proof/ there.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/metrics"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gpuproof-nvml:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: gpuproof-nvml discover [--node NAME] [--fractions 25,50,100] | processes | enforce --limit BYTES [--limits-file PATH]")
	}
	host, _ := os.Hostname()
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	node := fs.String("node", host, "the node name the ResourceSlices name")
	fractions := fs.String("fractions", "25,50,100", "slice sizes offered on every GPU, as the node plugin's --fractions")
	limit := fs.Uint64("limit", 0, "enforce: the claim's memory limit in bytes")
	limitsFile := fs.String("limits-file", "", "enforce: the claim's limits file, where the observation is written")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("initialise NVML (libnvidia-ml.so.1): %v; is the NVIDIA driver installed?", ret)
	}
	defer lib.Shutdown()
	res, err := discovery.Discover(lib)
	if err != nil {
		return err
	}
	var out any
	switch args[0] {
	case "discover":
		fr, err := publish.ParseFractions(*fractions)
		if err != nil {
			return err
		}
		out, err = discoverReport(lib, res, *node, fr)
		if err != nil {
			return err
		}
	case "processes":
		out, err = processReport(lib, res.GPUs, *node)
		if err != nil {
			return err
		}
	case "enforce":
		if *limit == 0 {
			return errors.New("enforce: --limit is required")
		}
		return enforceClaim(lib, res.GPUs, *limit, *limitsFile, os.Stdin, os.Stdout)
	default:
		return fmt.Errorf("unknown command %q: want discover, processes or enforce", args[0])
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

type gpuJSON struct {
	Index             int    `json:"index"`
	UUID              string `json:"uuid"`
	Model             string `json:"model"`
	MemoryBytes       uint64 `json:"memoryBytes"`
	ComputeCapability string `json:"computeCapability"`
	Architecture      string `json:"architecture"`
	MIGMode           string `json:"migMode"`
	PCIBusID          string `json:"pciBusId"`
	DriverVersion     string `json:"driverVersion"`
	CUDADriverVersion string `json:"cudaDriverVersion"`
}

type discoverJSON struct {
	GPUs           []gpuJSON            `json:"gpus"`
	Skipped        []discovery.Skipped  `json:"skipped"`
	ResourceSlices string               `json:"resourceSlices"`
	Devices        []publishedDeviceRef `json:"devices"`
}

type publishedDeviceRef struct {
	Name        string `json:"name"`
	MemoryBytes string `json:"memory"`
	Compute     string `json:"compute"`
}

func discoverReport(lib nvml.Interface, res discovery.Result, node string, fractions []int) (discoverJSON, error) {
	out := discoverJSON{GPUs: []gpuJSON{}, Skipped: append([]discovery.Skipped{}, res.Skipped...)}
	for _, g := range res.GPUs {
		out.GPUs = append(out.GPUs, gpuJSON{
			Index: g.Index, UUID: g.UUID, Model: g.Name, MemoryBytes: g.MemoryBytes,
			ComputeCapability: fmt.Sprintf("%d.%d", g.CCMajor, g.CCMinor), Architecture: g.Architecture,
			MIGMode: migMode(lib, g.Index), PCIBusID: g.PCIBusID,
			DriverVersion: g.DriverVersion, CUDADriverVersion: g.CUDADriverVersion,
		})
	}
	slices := resourceSlices(publish.Build(node, res.GPUs, publish.Options{Fractions: fractions, AnySize: contract.DefaultAnySize, TimeSliced: contract.DefaultTimeSlicing}), node)
	var docs []string
	for _, s := range slices {
		b, err := yaml.Marshal(s)
		if err != nil {
			return out, fmt.Errorf("render ResourceSlice: %w", err)
		}
		docs = append(docs, string(b))
		for _, d := range s.Spec.Devices {
			ref := publishedDeviceRef{Name: d.Name}
			if c, ok := d.Capacity[contract.CapacityMemory]; ok {
				ref.MemoryBytes = c.Value.String()
			}
			if c, ok := d.Capacity[contract.CapacityCompute]; ok {
				ref.Compute = c.Value.String()
			}
			out.Devices = append(out.Devices, ref)
		}
	}
	out.ResourceSlices = strings.Join(docs, "---\n")
	return out, nil
}

// migMode is what NVML says of the GPU's MIG mode; Discover passes over a
// GPU in MIG mode, so it is read here for the report.
func migMode(lib nvml.Interface, index int) string {
	dev, ret := lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return fmt.Sprintf("unreadable (%v)", ret)
	}
	current, pending, ret := dev.GetMigMode()
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED:
		return "not supported"
	case ret != nvml.SUCCESS:
		return fmt.Sprintf("unreadable (%v)", ret)
	case current != pending:
		return fmt.Sprintf("%s (pending %s)", onOff(current), onOff(pending))
	}
	return onOff(current)
}

func onOff(mode int) string {
	if mode == nvml.DEVICE_MIG_ENABLE {
		return "enabled"
	}
	return "disabled"
}

// resourceSlices is what the kubeletplugin helper's controller would
// create from the driver's resources: one ResourceSlice per Slice of a pool.
func resourceSlices(r resourceslice.DriverResources, node string) []resourcev1.ResourceSlice {
	var out []resourcev1.ResourceSlice
	for name, pool := range r.Pools {
		for _, s := range pool.Slices {
			out = append(out, resourcev1.ResourceSlice{
				TypeMeta:   metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceSlice"},
				ObjectMeta: metav1.ObjectMeta{GenerateName: node + "-" + contract.DriverName + "-"},
				Spec: resourcev1.ResourceSliceSpec{
					Driver:                 contract.DriverName,
					Pool:                   resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
					NodeName:               &node,
					Devices:                s.Devices,
					SharedCounters:         s.SharedCounters,
					PerDeviceNodeSelection: s.PerDeviceNodeSelection,
				},
			})
		}
	}
	return out
}

type processJSON struct {
	Pid       uint32 `json:"pid"`
	UsedBytes uint64 `json:"usedBytes"`
}

type gpuProcessesJSON struct {
	Index                 int           `json:"index"`
	UUID                  string        `json:"uuid"`
	Processes             []processJSON `json:"processes"`
	UnattributedBytes     float64       `json:"unattributedBytes"`
	UnattributedProcesses float64       `json:"unattributedProcesses"`
}

// processReport runs the node plugin's ProcessCollector with no claims
// prepared, as on a node where nothing was scheduled: every process on a
// GPU is memory no claim accounts for.
func processReport(lib nvml.Interface, gpus []discovery.GPU, node string) ([]gpuProcessesJSON, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(metrics.ProcessCollector{
		NVML: lib, GPUs: gpus, Hostname: node, ProcRoot: "/proc",
		Claims: func() []metrics.Claim { return nil },
	}); err != nil {
		return nil, err
	}
	families, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("collect the node plugin's process metrics: %w", err)
	}
	out := []gpuProcessesJSON{}
	for _, g := range gpus {
		r := gpuProcessesJSON{Index: g.Index, UUID: g.UUID, Processes: []processJSON{}}
		r.UnattributedBytes = gauge(families, "gpuslice_gpu_unattributed_memory_bytes", g.UUID)
		r.UnattributedProcesses = gauge(families, "gpuslice_gpu_unattributed_processes", g.UUID)
		if dev, ret := lib.DeviceGetHandleByUUID(g.UUID); ret == nvml.SUCCESS {
			procs, ret := dev.GetComputeRunningProcesses()
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("list the processes on GPU %d: %v", g.Index, ret)
			}
			for _, p := range procs {
				r.Processes = append(r.Processes, processJSON{Pid: p.Pid, UsedBytes: p.UsedGpuMemory})
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// gauge is the value of the series of name for the GPU uuid; -1 when the
// collector did not report one.
func gauge(families []*dto.MetricFamily, name, uuid string) float64 {
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "UUID" && l.GetValue() == uuid {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
