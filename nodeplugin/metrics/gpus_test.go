package metrics_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/metrics"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// gpuslice_gpus gives each published GPU's memory as discovery read it, and
// from where: v2 (less the driver's reservation) on one GPU, v1 on another
// whose driver answers the v2 call NOT_SUPPORTED.
func TestGPUsSayWhereTheirMemoryCameFrom(t *testing.T) {
	lib := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, "node")
	lib.Devices[0].(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: 32 << 30, Reserved: 300 << 20}, nvml.SUCCESS
	}
	lib.Devices[1].(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED
	}
	res, err := discovery.Discover(lib)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.GPUCollector{NVML: lib, GPUs: res.GPUs, Hostname: "node"})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "gpuslice_gpus" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			got[l["gpu"]+" "+l["memory_source"]+" "+l["modelName"]+" "+l["Hostname"]] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"0 nvml_v2 Tesla V100-PCIE-32GB node": 32<<30 - 300<<20,
		"1 nvml_v1 Tesla V100-PCIE-32GB node": 32 << 30,
	}
	if len(got) != len(want) {
		t.Fatalf("gpuslice_gpus series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("gpuslice_gpus{%s} = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
