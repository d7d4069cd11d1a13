package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
)

var descStranded = prometheus.NewDesc("gpuslice_gpu_stranded_memory_bytes",
	"Free memory of a GPU that holds slices which no slice of any package can use given what it holds: partition fractions that no packaged fraction fills, "+
		"any-size memory below the smallest any-size package that still fits the compute left, free MIG instances of a profile no package offers. "+
		"0 for a GPU that holds no slice, or serves time-sliced claims.",
	gpuLabels, nil)

// StrandedCollector reports each published GPU's stranded memory at scrape
// time.
type StrandedCollector struct {
	GPUs     []discovery.GPU
	Hostname string
	// Stranded gives the stranded bytes by GPU UUID, and false while they
	// cannot be known (the packages not read yet): no series then.
	Stranded func() (map[string]uint64, bool)
}

func (c StrandedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descStranded }

func (c StrandedCollector) Collect(ch chan<- prometheus.Metric) {
	bytes, ok := c.Stranded()
	if !ok {
		return
	}
	for _, g := range c.GPUs {
		ch <- prometheus.MustNewConstMetric(descStranded, prometheus.GaugeValue, float64(bytes[g.UUID]), strconv.Itoa(g.Index), g.UUID, g.Name, c.Hostname)
	}
}
