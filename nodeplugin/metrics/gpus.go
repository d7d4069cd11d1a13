package metrics

import (
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
)

// The DCGM exporter's names and labels (gpu, UUID, modelName, Hostname),
// so a dashboard written for it reads these series as they are.
var gpuLabels = []string{"gpu", "UUID", "modelName", "Hostname"}

var (
	descUtil       = prometheus.NewDesc("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", gpuLabels, nil)
	descFBUse      = prometheus.NewDesc("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", gpuLabels, nil)
	descFBFre      = prometheus.NewDesc("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", gpuLabels, nil)
	descTemp       = prometheus.NewDesc("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", gpuLabels, nil)
	descPower      = prometheus.NewDesc("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", gpuLabels, nil)
	descNVMLErrors = prometheus.NewDesc("gpuslice_gpu_nvml_errors", "Readings NVML refused at this scrape.", gpuLabels, nil)
)

// descGPUs says what discovery found, not what NVML reads now: the memory
// a GPU's slices are cut from, and where it came from.
var descGPUs = prometheus.NewDesc("gpuslice_gpus",
	"Memory in bytes each published GPU offers its slices; memory_source is where it was read: nvml_v2 (NVML's total less what the driver reserves) or nvml_v1 (the total, reservation included, from a driver without the v2 call).",
	append(gpuLabels, "memory_source"), nil)

// GPUCollector reads each published GPU from NVML at scrape time.
type GPUCollector struct {
	NVML     nvml.Interface
	GPUs     []discovery.GPU
	Hostname string
}

func (c GPUCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGPUs, descUtil, descFBUse, descFBFre, descTemp, descPower, descNVMLErrors} {
		ch <- d
	}
}

func (c GPUCollector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range c.GPUs {
		labels := []string{strconv.Itoa(g.Index), g.UUID, g.Name, c.Hostname}
		ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(g.MemoryBytes), append(labels, g.MemorySource)...)
		refused := 0
		dev, ret := c.NVML.DeviceGetHandleByUUID(g.UUID)
		if ret != nvml.SUCCESS {
			ch <- prometheus.MustNewConstMetric(descNVMLErrors, prometheus.GaugeValue, 1, labels...)
			continue
		}
		if u, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
			ch <- prometheus.MustNewConstMetric(descUtil, prometheus.GaugeValue, float64(u.Gpu), labels...)
		} else {
			refused++
		}
		if m, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			ch <- prometheus.MustNewConstMetric(descFBUse, prometheus.GaugeValue, float64(m.Used>>20), labels...)
			ch <- prometheus.MustNewConstMetric(descFBFre, prometheus.GaugeValue, float64(m.Free>>20), labels...)
		} else {
			refused++
		}
		if t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			ch <- prometheus.MustNewConstMetric(descTemp, prometheus.GaugeValue, float64(t), labels...)
		} else {
			refused++
		}
		if p, ret := dev.GetPowerUsage(); ret == nvml.SUCCESS {
			ch <- prometheus.MustNewConstMetric(descPower, prometheus.GaugeValue, float64(p)/1000, labels...)
		} else {
			refused++
		}
		ch <- prometheus.MustNewConstMetric(descNVMLErrors, prometheus.GaugeValue, float64(refused), labels...)
	}
}
