package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/metrics"
)

// Each GPU has one health series: 0 with no reason while healthy, 1 with
// the reason (the taint's value) while unhealthy.
func TestHealthSeries(t *testing.T) {
	gpus := []discovery.GPU{
		{Index: 0, UUID: "GPU-a", Name: "Tesla V100-PCIE-32GB"},
		{Index: 1, UUID: "GPU-b", Name: "Tesla V100-PCIE-32GB"},
	}
	reasons := map[string]string{"GPU-b": "xid-79"}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.HealthCollector{GPUs: gpus, Hostname: "node", Reason: func(uuid string) string { return reasons[uuid] }})
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
		"gpuslice_gpu_unhealthy 0 GPU-a node reason=":       0,
		"gpuslice_gpu_unhealthy 1 GPU-b node reason=xid-79": 1,
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
