package reconcile

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the loop's Prometheus metrics, labelled by stack.
type Metrics struct {
	lastApplied *prometheus.GaugeVec
	inSync      *prometheus.GaugeVec
	errors      *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lastApplied: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gpuslice_reconcile_last_applied_revision",
			Help: "1 for the revision (a Git commit; empty for a directory) the cluster last matched after a successful round: join on it, alert on it not changing.",
		}, []string{"stack", "revision"}),
		inSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gpuslice_reconcile_in_sync",
			Help: "1 when the last round that ran left the cluster matching the configuration (nothing to apply, or applied), 0 when it failed; a round skipped for the stack's lock changes nothing.",
		}, []string{"stack"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpuslice_reconcile_errors_total",
			Help: "Rounds that failed: the source could not be fetched, the configuration did not load, or the plan or the apply failed.",
		}, []string{"stack"}),
	}
	reg.MustRegister(m.lastApplied, m.inSync, m.errors)
	return m
}

func (m *Metrics) observe(stack string, r Result) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(stack) // present at 0 before the first failure
	if r.Err != nil {
		m.errors.WithLabelValues(stack).Inc()
	}
	if r.Locked != nil {
		return // a skipped round says nothing about the cluster
	}
	in := 0.0
	if r.InSync {
		in = 1
	}
	m.inSync.WithLabelValues(stack).Set(in)
	if r.InSync {
		m.lastApplied.DeletePartialMatch(prometheus.Labels{"stack": stack})
		m.lastApplied.WithLabelValues(stack, r.Revision.ID).Set(1)
	}
}
