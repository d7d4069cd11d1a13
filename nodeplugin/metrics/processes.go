package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
)

// The shim is the enforcement; this is the backstop. NVML lists every
// process using a GPU and the memory the driver gave it; each process's
// cgroup names its pod, and the checkpoint knows each claim's pods. A
// program that bypasses the shim (static linking, raw ioctls) still shows
// up here: as a claim above its limit, or as memory no claim accounts for.
var (
	descNVMLUsed         = prometheus.NewDesc("gpuslice_claim_nvml_memory_used_bytes", "Device memory NVML reports for the processes of the claim's pods.", claimLabels, nil)
	descOverLimit        = prometheus.NewDesc("gpuslice_claim_over_limit", "1 when NVML shows the claim's processes using more than its limit (something bypassed the shim).", claimLabels, nil)
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
		// pod UID -> claims prepared on this GPU; limit: each claim's
		// memory on this GPU (0: the claim is not on it)
		byPod := map[string][]int{}
		used := make([]uint64, len(claims))
		limit := make([]uint64, len(claims))
		onGPU := make([]bool, len(claims))
		for i, cl := range claims {
			for _, cg := range cl.GPUs {
				if cg.UUID == g.UUID {
					onGPU[i], limit[i] = true, cg.MemoryLimit
				}
			}
			if !onGPU[i] {
				continue
			}
			for _, pod := range cl.PodUIDs {
				byPod[pod] = append(byPod[pod], i)
			}
		}
		var unattributed uint64
		unattributedProcs := 0
		for _, p := range procs {
			owners := byPod[PodUIDOf(c.ProcRoot, p.Pid)]
			if len(owners) == 0 {
				unattributed += p.UsedGpuMemory
				unattributedProcs++
				continue
			}
			// a pod with two claims on one GPU: charge the first, the
			// cgroup cannot tell them apart
			used[owners[0]] += p.UsedGpuMemory
		}
		for i, cl := range claims {
			if !onGPU[i] {
				continue
			}
			labels := []string{cl.Namespace, cl.Name, cl.UID, g.UUID}
			over := 0.0
			if used[i] > limit[i] {
				over = 1
			}
			ch <- prometheus.MustNewConstMetric(descNVMLUsed, prometheus.GaugeValue, float64(used[i]), labels...)
			ch <- prometheus.MustNewConstMetric(descOverLimit, prometheus.GaugeValue, over, labels...)
		}
		gl := []string{strconv.Itoa(g.Index), g.UUID, g.Name, c.Hostname}
		ch <- prometheus.MustNewConstMetric(descUnaccounted, prometheus.GaugeValue, float64(unattributed), gl...)
		ch <- prometheus.MustNewConstMetric(descUnaccountedProcs, prometheus.GaugeValue, float64(unattributedProcs), gl...)
	}
}

// podUIDPattern finds the pod UID in a cgroup path, as the cgroupfs driver
// writes it (pod1b4e…-…) and as the systemd driver does (pod1b4e…_…).
var podUIDPattern = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)

// PodUIDOf returns the UID of the pod a process runs in, from its cgroup,
// or "" for a process outside any pod (or gone).
func PodUIDOf(procRoot string, pid uint32) string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		return ""
	}
	m := podUIDPattern.FindSubmatch(b)
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(string(m[1]), "_", "-")
}
