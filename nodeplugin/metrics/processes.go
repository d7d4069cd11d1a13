package metrics

import (
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/gpuprocs"
)

// What NVML shows of each claim, attributed by package gpuprocs: a program
// that bypasses the shim (static linking, raw ioctls) shows up here as a
// claim above its limit (which package enforce stops) or as memory no claim
// accounts for.
var (
	descNVMLUsed         = prometheus.NewDesc("gpuslice_claim_nvml_memory_used_bytes", "Device memory NVML reports for the processes of the claim's pods.", claimLabels, nil)
	descOverLimit        = prometheus.NewDesc("gpuslice_claim_over_limit", "1 when NVML shows the claim's processes using more than its limit (something bypassed the shim); a time-sliced claim has no limit and no such series.", claimLabels, nil)
	descUnaccounted      = prometheus.NewDesc("gpuslice_gpu_unattributed_memory_bytes", "Device memory of processes on the GPU that belong to no claim prepared on it.", gpuLabels, nil)
	descUnaccountedProcs = prometheus.NewDesc("gpuslice_gpu_unattributed_processes", "Processes on the GPU that belong to no claim prepared on it.", gpuLabels, nil)
)

// ProcessCollector attributes NVML's per-process memory to claims.
type ProcessCollector struct {
	NVML     nvml.Interface
	GPUs     []discovery.GPU
	Hostname string
	Claims   func() []Claim
	// ProcRoot is where the processes' cgroup files are read (/proc; the
	// plugin's pod needs the host's PID namespace).
	ProcRoot string
}

func (c ProcessCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNVMLUsed, descOverLimit, descUnaccounted, descUnaccountedProcs} {
		ch <- d
	}
}

func (c ProcessCollector) Collect(ch chan<- prometheus.Metric) {
	claims := c.Claims()
	for _, g := range c.GPUs {
		dev, ret := c.NVML.DeviceGetHandleByUUID(g.UUID)
		if ret != nvml.SUCCESS {
			continue
		}
		procs, ret := dev.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			continue
		}
		// limit: each claim's memory on this GPU
		used := make([]uint64, len(claims))
		limit := make([]uint64, len(claims))
		onGPU := make([]bool, len(claims))
		pods := make([][]string, len(claims))
		for i, cl := range claims {
			for _, cg := range cl.GPUs {
				if cg.UUID == g.UUID {
					onGPU[i], limit[i], pods[i] = true, cg.MemoryLimit, cl.PodUIDs
				}
			}
		}
		owners := gpuprocs.NewOwners(pods)
		var unattributed uint64
		unattributedProcs := 0
		for _, p := range procs {
			i := owners.Of(gpuprocs.PodUIDOf(c.ProcRoot, p.Pid))
			if i < 0 {
				unattributed += p.UsedGpuMemory
				unattributedProcs++
				continue
			}
			used[i] += p.UsedGpuMemory
		}
		for i, cl := range claims {
			if !onGPU[i] {
				continue
			}
			labels := []string{cl.Namespace, cl.Name, cl.UID, g.UUID}
			ch <- prometheus.MustNewConstMetric(descNVMLUsed, prometheus.GaugeValue, float64(used[i]), labels...)
			if cl.Unlimited {
				continue // no limit to be over
			}
			over := 0.0
			if used[i] > limit[i] {
				over = 1
			}
			ch <- prometheus.MustNewConstMetric(descOverLimit, prometheus.GaugeValue, over, labels...)
		}
		gl := []string{strconv.Itoa(g.Index), g.UUID, g.Name, c.Hostname}
		ch <- prometheus.MustNewConstMetric(descUnaccounted, prometheus.GaugeValue, float64(unattributed), gl...)
		ch <- prometheus.MustNewConstMetric(descUnaccountedProcs, prometheus.GaugeValue, float64(unattributedProcs), gl...)
	}
}
