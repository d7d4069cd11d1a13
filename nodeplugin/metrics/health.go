package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// descHealthy is the series the GPUSliceGPUUnhealthy alert reads
// (deploy/monitoring/alerts.yaml). The reason is a label, not a separate
// series, so an alert names it without a join; it is "" while the GPU is
// healthy, so a GPU has one series that changes only when its health does.
var descHealthy = prometheus.NewDesc("gpuslice_gpu_healthy",
	"1 while the node plugin judges the GPU healthy, 0 while it is unhealthy and its devices are tainted; reason says why (a critical XID, a double-bit ECC error, a GPU that stopped answering NVML), empty while healthy.",
	append(gpuLabels, "reason"), nil)

// GPUHealth is one published GPU's health as the plugin last judged it.
type GPUHealth struct {
	Index     int
	UUID      string
	ModelName string
	Healthy   bool
	// Reason is why the GPU is unhealthy; ignored while it is healthy.
	Reason string
}

// HealthCollector reports each published GPU's health.
type HealthCollector struct {
	Hostname string
	Health   func() []GPUHealth
}

func (c HealthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descHealthy }

func (c HealthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, h := range c.Health() {
		v, reason := 0.0, h.Reason
		if h.Healthy {
			v, reason = 1, ""
		}
		ch <- prometheus.MustNewConstMetric(descHealthy, prometheus.GaugeValue, v,
			strconv.Itoa(h.Index), h.UUID, h.ModelName, c.Hostname, reason)
	}
}
