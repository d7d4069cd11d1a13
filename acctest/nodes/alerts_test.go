package nodes

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// Each recorded scrape is replayed one replayInterval after the one before,
// so that a rule's `for` (up to the hour of GPUSliceGPUMemoryStranded)
// passes within the recordedScrapes of a steady state.
const (
	replayInterval  = "5m"
	recordedScrapes = 15 // 0 to 70 minutes
)

// The shipped alert rules (deploy/monitoring/alerts.yaml), run by
// Prometheus' own rule evaluator (promtool) on series scraped from the node
// plugin's /metrics on a real node (kubelet, containerd, runc, two simulated
// V100s): an hour of a healthy node holding a slice fires nothing; after
// a process that bypassed the shim is stopped, a 20 GiB any-size slice
// leaves GPU 1 with memory no package fits, and an XID on GPU 0, exactly
// the unhealthy-GPU, enforcer and stranded-memory alerts fire. Every metric
// the rules read is one the real plugin serves.
func TestAlertRulesOnRecordedSeries(t *testing.T) {
	shared := realnodetest.Shared(t)
	env := realnodetest.Start(t, shared.Cluster, realnodetest.Options{Names: []string{"real-alerts"}, GPUs: "v100-32gb:2", PluginArgs: []string{"--any-size=true"}})
	node := env.Nodes[0]
	ns := createNamespace(t, env, "alerts")
	model := simulate.V100PCIe32GB.Name
	quarter := createPackageClass(t, env, spec.Package{Name: "alerts-v100-25pct", GPUModel: model, Fraction: 25})
	large := createPackageClass(t, env, spec.Package{Name: "alerts-v100-20gi", GPUModel: model, Memory: "20Gi", MemoryBytes: 20 << 30, ComputeShare: 60})

	createClaimOnGPU(t, env, ns, "steady", quarter, 0)
	steady := podOnNode(ns, "steady", "steady", node.Name, []string{"slice-check", "--hold", "1024"})
	createPod(t, env, steady)
	logsWith(t, env, steady, "", "holding 1024 MiB")
	uuids := map[string]string{} // by GPU index
	waitForScrape(t, node, "a prepared quarter of GPU 0 and nothing stranded", func(s string) (bool, string) {
		for _, gpu := range []string{"0", "1"} {
			m := regexp.MustCompile(`(?m)^gpuslice_gpu_stranded_memory_bytes\{[^}]*UUID="([^"]+)"[^}]*gpu="` + gpu + `"[^}]*\} (\S+)$`).FindStringSubmatch(s)
			if m == nil || m[2] != "0" {
				return false, fmt.Sprintf("GPU %s stranded: %v", gpu, m)
			}
			uuids[gpu] = m[1]
		}
		return realnodetest.MetricValue(s, "gpuslice_prepared_claims") == 1, "prepared claims: " + fmt.Sprint(realnodetest.MetricValue(s, "gpuslice_prepared_claims"))
	})
	healthy := record(t, node)

	createClaimOnGPU(t, env, ns, "attacker", quarter, 0)
	attacker := podOnNode(ns, "attacker", "attacker", node.Name, []string{"slice-attack", "alloc", "10240", "--hold"})
	createPod(t, env, attacker)
	attackerUID := waitForClaim(t, env, ns, "attacker")
	logsWith(t, env, attacker, "", "around the library")
	waitForScrape(t, node, "the enforcer to stop the attacker", func(s string) (bool, string) {
		kills := realnodetest.ClaimMetric(s, "gpuslice_claim_enforcer_kills_total", attackerUID)
		return kills == 1, fmt.Sprintf("%v kills", kills)
	})
	createClaimOnGPU(t, env, ns, "large", large, 1)
	largePod := podOnNode(ns, "large", "large", node.Name, []string{"slice-check", "--hold", "1024"})
	createPod(t, env, largePod)
	logsWith(t, env, largePod, "", "holding 1024 MiB")
	faults, err := os.OpenFile(simulate.FaultFile(node.StateDir()), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("the simulated driver's fault log: %v", err)
	}
	_, err = fmt.Fprintln(faults, "xid 0 79")
	faults.Close()
	if err != nil {
		t.Fatal(err)
	}
	var stranded float64
	waitForScrape(t, node, "GPU 0 unhealthy, the bypass stopped, GPU 1 stranding its memory", func(s string) (bool, string) {
		gpus := regexp.MustCompile(`(?m)^gpuslice_gpus\{[^}]*gpu="1"[^}]*\} (\S+)$`).FindStringSubmatch(s)
		got := regexp.MustCompile(`(?m)^gpuslice_gpu_stranded_memory_bytes\{[^}]*gpu="1"[^}]*\} (\S+)$`).FindStringSubmatch(s)
		unhealthy := regexp.MustCompile(`(?m)^gpuslice_gpu_unhealthy\{[^}]*gpu="0"[^}]*reason="xid-79"[^}]*\} 1$`).MatchString(s)
		kills := realnodetest.ClaimMetric(s, "gpuslice_claim_enforcer_kills_total", attackerUID)
		over := realnodetest.ClaimMetric(s, "gpuslice_claim_over_limit", attackerUID)
		if gpus == nil || got == nil {
			return false, "no gpuslice_gpus or stranded series for GPU 1"
		}
		memory, _ := strconv.ParseFloat(gpus[1], 64)
		// 20 GiB held of the any-size device's memory (the GPU's in steps):
		// what is left is less than the only any-size package
		want := float64(uint64(memory)/contract.MemoryStep*contract.MemoryStep - 20<<30)
		stranded, _ = strconv.ParseFloat(got[1], 64)
		return unhealthy && kills == 1 && over == 0 && stranded == want,
			fmt.Sprintf("GPU 0 unhealthy: %v; attacker killed %v times, over its limit %v; GPU 1 strands %v bytes, want %v", unhealthy, kills, over, stranded, want)
	})
	t.Logf("GPU 1 strands %.1f GiB of its memory beside the 20 GiB slice", stranded/(1<<30))
	faulty := record(t, node)

	for _, name := range ruleMetrics(t) {
		if !healthy.names[name] && !faulty.names[name] {
			t.Errorf("the alert rules read %s, which the node plugin on a real node did not serve in any scrape", name)
		}
	}
	gpu := func(alert, severity, index string) map[string]string {
		return map[string]string{"alertname": alert, "severity": severity, "Hostname": node.Name, "gpu": index, "UUID": uuids[index], "modelName": model}
	}
	unhealthy := gpu("GPUSliceGPUUnhealthy", "critical", "0")
	unhealthy["reason"] = "xid-79"
	enforcer := map[string]string{"alertname": "GPUSliceEnforcerStoppedProcess", "severity": "warning", "namespace": ns, "claim": "attacker", "claim_uid": attackerUID, "UUID": uuids["0"]}
	last := fmt.Sprintf("%dm", (recordedScrapes-1)*5)
	runRuleTests(t, replayInterval,
		ruleTest{Name: "healthy node, recorded", Interval: replayInterval, InputSeries: healthy.inputSeries(),
			ExprTests: []exprTest{firing("0m"), firing("35m"), firing(last)}},
		ruleTest{Name: "faults, recorded", Interval: replayInterval, InputSeries: faulty.inputSeries(),
			ExprTests: []exprTest{firing("10m", unhealthy, enforcer), firing(last, unhealthy, gpu("GPUSliceGPUMemoryStranded", "warning", "1"))}},
	)
}

// record scrapes the node plugin recordedScrapes times.
func record(t *testing.T, n *realnode.Node) *recording {
	t.Helper()
	r := newRecording()
	for range recordedScrapes {
		r.add(t, realnodetest.Scrape(t, n), fmt.Sprintf("%s:%d", n.IP, realnode.MetricsPort))
	}
	t.Logf("recorded %s from %s", r, n.Name)
	return r
}

// waitForScrape waits until a scrape of the node plugin meets cond.
func waitForScrape(t *testing.T, n *realnode.Node, what string, cond func(scrape string) (bool, string)) {
	t.Helper()
	realnodetest.Eventually(t, 2*time.Minute, what, func() (bool, string) {
		s, err := realnodetest.ReadMetrics(n)
		if err != nil {
			return false, err.Error()
		}
		return cond(s)
	})
}

// createPackageClass creates the DeviceClass the engine renders for pkg.
func createPackageClass(t *testing.T, env *realnodetest.Env, pkg spec.Package) *spec.Package {
	t.Helper()
	client := env.Cluster.Client()
	if _, err := client.ResourceV1().DeviceClasses().Create(context.Background(), render.DeviceClass(&pkg), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.ResourceV1().DeviceClasses().Delete(context.Background(), pkg.Name, metav1.DeleteOptions{})
	})
	return &pkg
}

// createClaimOnGPU creates a claim for one slice of pkg, as the engine's
// claim templates ask for it, on the GPU of that index (of whichever node
// its pod is on).
func createClaimOnGPU(t *testing.T, env *realnodetest.Env, ns, name string, pkg *spec.Package, index int) {
	t.Helper()
	exactly := &resourcev1.ExactDeviceRequest{DeviceClassName: pkg.Name, Selectors: []resourcev1.DeviceSelector{{
		CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf(`device.attributes["%s"].%s == %d`, contract.DriverName, contract.AttrIndex, index)},
	}}}
	if requests := render.CapacityRequests(pkg); len(requests) > 0 {
		exactly.Capacity = &resourcev1.CapacityRequirements{Requests: requests}
	}
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: exactly}}}},
	}
	if _, err := env.Cluster.Client().ResourceV1().ResourceClaims(ns).Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podOnNode is claimPod kept to one node.
func podOnNode(ns, name, claim, node string, command []string) *corev1.Pod {
	p := claimPod(ns, name, claim, command)
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	return p
}

// waitForClaim waits until the claim is allocated and returns its UID.
func waitForClaim(t *testing.T, env *realnodetest.Env, ns, name string) string {
	t.Helper()
	var uid string
	realnodetest.Eventually(t, 2*time.Minute, "claim "+ns+"/"+name+" allocated", func() (bool, string) {
		c, err := env.Cluster.Client().ResourceV1().ResourceClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || c.Status.Allocation == nil {
			return false, errString(err)
		}
		uid = string(c.UID)
		return true, ""
	})
	return uid
}
