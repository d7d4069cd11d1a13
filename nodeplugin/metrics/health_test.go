package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/nodeplugin/metrics"
)

// Each GPU has one health series: 1 with no reason while healthy (a stale
// reason is dropped), 0 with the reason while unhealthy.
func TestHealthSeries(t *testing.T) {
	health := []metrics.GPUHealth{
		{Index: 0, UUID: "GPU-a", ModelName: "Tesla V100-PCIE-32GB", Healthy: true, Reason: "xid-79"},
		{Index: 1, UUID: "GPU-b", ModelName: "Tesla V100-PCIE-32GB", Reason: "xid-79"},
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.HealthCollector{Hostname: "node", Health: func() []metrics.GPUHealth { return health }})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			got[mf.GetName()+" "+l["gpu"]+" "+l["UUID"]+" "+l["Hostname"]+" reason="+l["reason"]] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"gpuslice_gpu_healthy 0 GPU-a node reason=":       1,
		"gpuslice_gpu_healthy 1 GPU-b node reason=xid-79": 0,
	}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v; all: %v", k, g, ok, v, got)
		}
	}
}
