package driver_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
)

// TestClaimMetricsOfEveryKind prepares a claim of each package kind on one
// node (two whole GPUs, a fraction, an any-size share, a time-sliced share
// and a MIG instance), gives each claim's pod a process of 1 GiB on each of
// its GPUs as NVML lists them, and compares every claim series a scrape
// gives with what is true of the claim: nothing missing, nothing more. A
// time-sliced claim has no accounting region and no memory limit, so it has
// neither a region read error nor an over-limit series; an alert on either
// would page for as long as it runs.
func TestClaimMetricsOfEveryKind(t *testing.T) {
	const node = "every-kind-node"
	e := newEnv(t, node)
	cfg := e.migPluginConfig(node, "a100-40gb:1,mig=1g.5gb*2;v100-32gb:5")
	cfg.Publish = everything
	cfg.ProcRoot = t.TempDir()
	reg := cfg.Registerer.(*prometheus.Registry)
	lib := cfg.NVML.(*server.Server)
	var mu sync.Mutex
	procs := map[string][]nvml.ProcessInfo{} // by GPU UUID
	for _, d := range lib.Devices {
		dev := d.(*server.Device)
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			mu.Lock()
			defer mu.Unlock()
			return procs[dev.UUID], nvml.SUCCESS
		}
	}
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	e.waitSlices(node, 2+5*9)
	k, _ := dialKubelet(t, cfg)

	whole := e.runPodN("whole", e.class(100), node, 2)
	pods := map[string]string{ // pod: claim
		"whole":    whole,
		"fraction": e.runPod("fraction", e.class(25), node),
		"anysize":  e.runPodCapacity("anysize", e.anySizeClass("6Gi", 20), node, map[string]string{"memory": "6Gi", "compute": "20"}),
		"shared":   e.runPodCapacity("shared", e.timeSlicedClass(4), node, map[string]string{"shares": strconv.FormatInt(contract.SharesOf(4), 10)}),
		"mig":      e.runPod("mig", e.migClass("1g.5gb"), node),
	}
	pid := uint32(1000)
	uids := map[string]string{}   // pod: claim UID
	gpus := map[string][]string{} // pod: its claim's GPU UUIDs
	for _, pod := range slices.Sorted(maps.Keys(pods)) {
		cl, _ := e.placement(pod, pods[pod], true)
		if _, err := k.Prepare(e.ctx, cl); err != nil {
			t.Fatalf("prepare the claim of %s: %v", pod, err)
		}
		uids[pod] = string(cl.UID)
		entry, err := mustCheckpoint(t, cfg.StateDir).Load()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range entry.Claims[string(cl.UID)].Devices {
			gpus[pod] = append(gpus[pod], d.GPUUUID)
		}
		if pod == "mig" {
			continue // nothing lists a MIG instance's processes on its GPU
		}
		po, err := e.client.CoreV1().Pods(e.ns).Get(e.ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, uuid := range gpus[pod] {
			pid++
			mu.Lock()
			procs[uuid] = append(procs[uuid], nvml.ProcessInfo{Pid: pid, UsedGpuMemory: 1 << 30})
			mu.Unlock()
			dir := filepath.Join(cfg.ProcRoot, fmt.Sprint(pid))
			cgroup := "0::/kubepods.slice/kubepods-pod" + strings.ReplaceAll(string(po.UID), "-", "_") + ".slice/cri-containerd-app.scope\n"
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	// region: the series of a claim's accounting region, fresh (no process
	// of the claim has loaded the library here); nvml: a GPU's series of
	// the claim's processes as NVML lists them.
	region := func(pod string, limit, share float64) map[string]float64 {
		u := strings.Join(gpus[pod], ",")
		m := map[string]float64{
			"gpuslice_claim_region_read_errors/" + u: 0, "gpuslice_claim_memory_limit_bytes/" + u: limit,
			"gpuslice_claim_memory_used_bytes/" + u: 0, "gpuslice_claim_memory_high_water_bytes/" + u: 0,
			"gpuslice_claim_denied_allocations_total/" + u: 0, "gpuslice_claim_throttled_seconds_total/" + u: 0,
			"gpuslice_claim_compute_share_percent/" + u: share, "gpuslice_claim_processes/" + u: 0,
		}
		if share < 100 { // the shim measures GPU time only where it paces
			m["gpuslice_claim_gpu_busy_seconds_total/"+u] = 0
		}
		return m
	}
	nvmlSeries := func(m map[string]float64, uuid string, used float64, limited bool) map[string]float64 {
		m["gpuslice_claim_nvml_memory_used_bytes/"+uuid] = used
		if limited {
			m["gpuslice_claim_over_limit/"+uuid] = 0
		}
		return m
	}
	want := map[string]map[string]float64{ // claim UID: series/UUID label: value
		uids["whole"]: nvmlSeries(nvmlSeries(region("whole", 64<<30, 100),
			gpus["whole"][0], 1<<30, true), gpus["whole"][1], 1<<30, true),
		uids["fraction"]: nvmlSeries(region("fraction", 8<<30, 25), gpus["fraction"][0], 1<<30, true),
		uids["anysize"]:  nvmlSeries(region("anysize", 6<<30, 20), gpus["anysize"][0], 1<<30, true),
		uids["shared"]:   nvmlSeries(map[string]float64{}, gpus["shared"][0], 1<<30, false),
		uids["mig"]: nvmlSeries(map[string]float64{
			"gpuslice_claim_mig_instance/" + gpus["mig"][0]: 1,
		}, gpus["mig"][0], 0, true),
	}
	got := claimSeries(t, reg)
	for _, pod := range slices.Sorted(maps.Keys(uids)) {
		if g, w := got[uids[pod]], want[uids[pod]]; !maps.Equal(g, w) {
			t.Errorf("the %s claim's series:\n%s\nwant\n%s", pod, formatSeries(g), formatSeries(w))
		}
	}
	if len(got) != len(want) {
		t.Errorf("series of %d claims, want %d: %v", len(got), len(want), slices.Sorted(maps.Keys(got)))
	}
}

// claimSeries is every series with a claim_uid label, by claim UID, as
// name/UUID label: value.
func claimSeries(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			uid, ok := labels["claim_uid"]
			if !ok {
				continue
			}
			if out[uid] == nil {
				out[uid] = map[string]float64{}
			}
			out[uid][f.GetName()+"/"+labels["UUID"]] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

func formatSeries(m map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "  %s %g\n", k, m[k])
	}
	return b.String()
}
