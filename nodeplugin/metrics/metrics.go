// Package metrics is the node plugin's Prometheus side: prepare/unprepare
// timings and errors, prepared claims, per-claim usage read from the shim's
// accounting regions, and per-GPU readings from NVML under the names
// NVIDIA's DCGM exporter uses, so existing dashboards work unchanged.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Plugin holds the metrics the plugin updates as it works.
type Plugin struct {
	PrepareSeconds   prometheus.Histogram
	UnprepareSeconds prometheus.Histogram
	PrepareErrors    prometheus.Counter
	UnprepareErrors  prometheus.Counter
	PreparedClaims   prometheus.Gauge
	GPUsPublished    prometheus.Gauge
	GPUsSkipped      *prometheus.GaugeVec
	CheckpointErrors prometheus.Counter
	// CheckpointRebuilds counts rebuilds of the checkpoint from the API
	// server, by reason: "corrupt", or "unknown-format" (written by a newer
	// plugin, found after a rollback).
	CheckpointRebuilds *prometheus.CounterVec
	// BypassOpen is 1 when the node's container runtime lets images pick
	// GPUs (NVIDIA_VISIBLE_DEVICES) around the slices.
	BypassOpen prometheus.Gauge
}

// NewPlugin creates the plugin's metrics and registers them with reg.
func NewPlugin(reg prometheus.Registerer) *Plugin {
	buckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	m := &Plugin{
		PrepareSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gpuslice_prepare_duration_seconds", Help: "Time to prepare the claims of one NodePrepareResources call.", Buckets: buckets,
		}),
		UnprepareSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gpuslice_unprepare_duration_seconds", Help: "Time to unprepare the claims of one NodeUnprepareResources call.", Buckets: buckets,
		}),
		PrepareErrors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "gpuslice_prepare_errors_total", Help: "Claims that failed to prepare."}),
		UnprepareErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpuslice_unprepare_errors_total", Help: "Claims that failed to unprepare."}),
		PreparedClaims:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuslice_prepared_claims", Help: "Claims prepared on this node."}),
		GPUsPublished:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuslice_gpus_published", Help: "GPUs offered as slices."}),
		GPUsSkipped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gpuslice_gpu_skipped", Help: "1 for each GPU discovery passed over (unreadable, or in MIG mode with unreadable instances); the reason is a label.",
		}, []string{"gpu", "UUID", "reason"}),
		CheckpointErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpuslice_checkpoint_corruptions_total", Help: "Times the checkpoint was found corrupt and rebuilt from the API server.",
		}),
		CheckpointRebuilds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpuslice_checkpoint_rebuilds_total", Help: "Times the checkpoint was rebuilt from the API server, by reason: corrupt, or unknown-format (written by a newer node plugin).",
		}, []string{"reason"}),
		BypassOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpuslice_node_env_bypass_open", Help: "1 when the node's NVIDIA Container Toolkit lets unprivileged containers pick GPUs with NVIDIA_VISIBLE_DEVICES, around every slice.",
		}),
	}
	reg.MustRegister(m.BypassOpen, m.PrepareSeconds, m.UnprepareSeconds, m.PrepareErrors, m.UnprepareErrors, m.PreparedClaims,
		m.GPUsPublished, m.GPUsSkipped, m.CheckpointErrors, m.CheckpointRebuilds)
	return m
}
