package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
)

var descUnhealthy = prometheus.NewDesc("gpuslice_gpu_unhealthy",
	"1 while the node plugin finds the GPU failing (a critical XID that is the GPU's fault, a double-bit ECC error, or NVML cannot read it) and taints its devices gpuslice.dev/unhealthy; reason is the taint's value (e.g. xid-79, ecc-double-bit, gpu-lost). 0, with an empty reason, for a healthy GPU.",
	append(gpuLabels, "reason"), nil)

// HealthCollector reports each published GPU's health at scrape time.
type HealthCollector struct {
	GPUs     []discovery.GPU
	Hostname string
	// Reason says why a GPU (by UUID) is unhealthy, or "" if it is not.
	Reason func(uuid string) string
}

func (c HealthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descUnhealthy }

func (c HealthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range c.GPUs {
		reason, v := c.Reason(g.UUID), 0.0
		if reason != "" {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descUnhealthy, prometheus.GaugeValue, v, strconv.Itoa(g.Index), g.UUID, g.Name, c.Hostname, reason)
	}
}
