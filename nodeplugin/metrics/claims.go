package metrics

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// Claim is a prepared claim whose accounting region is read at scrape time.
type Claim struct {
	UID, Namespace, Name string
	// GPUs are the claim's GPUs: one for a slice, several for a claim of
	// whole GPUs.
	GPUs          []ClaimGPU
	AccountingDir string // host directory holding the region
	PodUIDs       []string
	// Unlimited is a time-sliced claim: nothing holds it to a memory limit
	// or a compute share, so it has no accounting region to read and no
	// limit to be over.
	Unlimited bool
}

// ClaimGPU is one GPU of a claim and the memory the claim may use on it.
type ClaimGPU struct {
	UUID        string
	MemoryLimit uint64
	// MIG is the MIG instance the claim holds on the GPU: the hardware
	// holds it there, and it has no accounting region.
	MIG *ClaimMIG
}

// ClaimMIG is a claim's MIG instance.
type ClaimMIG struct {
	UUID, Profile                string
	GPUInstance, ComputeInstance int
}

// uuidLabel is the UUID label of a claim's region series: its GPU's UUID,
// or the comma-separated UUIDs of a claim of several GPUs (the region is
// the claim's, one series for all its GPUs; per-GPU series come from
// ProcessCollector).
func (c Claim) uuidLabel() string {
	uuids := make([]string, len(c.GPUs))
	for i, g := range c.GPUs {
		uuids[i] = g.UUID
	}
	return strings.Join(uuids, ",")
}

var claimLabels = []string{"namespace", "claim", "claim_uid", "UUID"}

var (
	descLimit     = prometheus.NewDesc("gpuslice_claim_memory_limit_bytes", "Device memory budget of the claim.", claimLabels, nil)
	descUsed      = prometheus.NewDesc("gpuslice_claim_memory_used_bytes", "Device memory charged by all processes of the claim.", claimLabels, nil)
	descHighWater = prometheus.NewDesc("gpuslice_claim_memory_high_water_bytes", "Highest memory charged at once.", claimLabels, nil)
	descDenied    = prometheus.NewDesc("gpuslice_claim_denied_allocations_total", "Allocations refused because they would exceed the budget.", claimLabels, nil)
	descThrottled = prometheus.NewDesc("gpuslice_claim_throttled_seconds_total", "Time kernel launches were held back to keep the compute share.", claimLabels, nil)
	// The shim measures GPU time only where it paces launches (a compute
	// share under 100), so a claim of a whole share has none to report.
	descBusy      = prometheus.NewDesc("gpuslice_claim_gpu_busy_seconds_total", "GPU time the claim's kernel launches were measured to take (CUDA events around each paced launch); only claims with a compute share under 100 are measured.", claimLabels, nil)
	descShare     = prometheus.NewDesc("gpuslice_claim_compute_share_percent", "Compute share of the claim.", claimLabels, nil)
	descProcesses = prometheus.NewDesc("gpuslice_claim_processes", "Processes attached to the claim's region.", claimLabels, nil)
	descReadError = prometheus.NewDesc("gpuslice_claim_region_read_errors", "1 when the claim's accounting region could not be read at this scrape.", claimLabels, nil)
)

// descMIG says which claim holds which MIG instance.
var descMIG = prometheus.NewDesc("gpuslice_claim_mig_instance", "1 for the MIG instance a claim holds: its UUID, profile and GPU and compute instance ids on its GPU (UUID).",
	append(claimLabels, "mig_uuid", "profile", "gpu_instance", "compute_instance"), nil)

// ClaimCollector reports every prepared claim's accounting region, or the
// MIG instance it holds; a time-sliced claim has neither.
type ClaimCollector struct {
	Claims func() []Claim
}

func (c ClaimCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLimit, descUsed, descHighWater, descDenied, descThrottled, descBusy, descShare, descProcesses, descReadError, descMIG} {
		ch <- d
	}
}

func (c ClaimCollector) Collect(ch chan<- prometheus.Metric) {
	for _, cl := range c.Claims() {
		labels := []string{cl.Namespace, cl.Name, cl.UID, cl.uuidLabel()}
		if collectMIG(ch, cl) || cl.Unlimited {
			continue
		}
		r, err := accounting.ReadFile(filepath.Join(cl.AccountingDir, contract.RegionFile))
		failed := 0.0
		if err != nil {
			failed = 1
		}
		ch <- prometheus.MustNewConstMetric(descReadError, prometheus.GaugeValue, failed, labels...)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(r.MemoryLimit), labels...)
		ch <- prometheus.MustNewConstMetric(descUsed, prometheus.GaugeValue, float64(r.Used), labels...)
		ch <- prometheus.MustNewConstMetric(descHighWater, prometheus.GaugeValue, float64(r.HighWater), labels...)
		ch <- prometheus.MustNewConstMetric(descDenied, prometheus.CounterValue, float64(r.OOMCount), labels...)
		ch <- prometheus.MustNewConstMetric(descThrottled, prometheus.CounterValue, r.Throttled.Seconds(), labels...)
		if r.ComputeShare < 100 {
			ch <- prometheus.MustNewConstMetric(descBusy, prometheus.CounterValue, r.GPUBusy.Seconds(), labels...)
		}
		ch <- prometheus.MustNewConstMetric(descShare, prometheus.GaugeValue, float64(r.ComputeShare), labels...)
		alive := 0
		for _, p := range r.Processes {
			if p.Alive {
				alive++
			}
		}
		ch <- prometheus.MustNewConstMetric(descProcesses, prometheus.GaugeValue, float64(alive), labels...)
	}
}

// collectMIG reports a MIG claim's instances; false for a claim without.
func collectMIG(ch chan<- prometheus.Metric, cl Claim) bool {
	found := false
	for _, g := range cl.GPUs {
		if m := g.MIG; m != nil {
			found = true
			ch <- prometheus.MustNewConstMetric(descMIG, prometheus.GaugeValue, 1, cl.Namespace, cl.Name, cl.UID, g.UUID,
				m.UUID, m.Profile, strconv.Itoa(m.GPUInstance), strconv.Itoa(m.ComputeInstance))
		}
	}
	return found
}
