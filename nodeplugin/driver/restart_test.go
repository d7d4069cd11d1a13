package driver_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// preparedClaim starts a plugin for a fresh node, has the scheduler
// allocate one 25 % claim there and prepares it; it returns the config and
// the claim's UID with the plugin stopped.
func preparedClaim(t *testing.T, e *env, node string) (driver.Config, string) {
	t.Helper()
	p, cfg := e.startPlugin(node, 1)
	e.waitSlices(node, 7)
	claimName := e.runPod("app", e.class(25), node)
	claim, _ := e.placement("app", claimName, true)
	if _, err := prepare(t, e, cfg, claim); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	return cfg, string(claim.UID)
}

func restart(t *testing.T, e *env, cfg driver.Config) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return reg
}

// TestReboot: after a reboot (new boot ID, /run and the CDI dir emptied)
// the plugin recreates the spec and a fresh accounting region of every
// claim still prepared.
func TestReboot(t *testing.T) {
	e := newEnv(t, "reboot-node")
	cfg, uid := preparedClaim(t, e, "reboot-node")
	region := filepath.Join(cfg.AccountingRoot, uid, contract.RegionFile)
	before, err := accounting.ReadFile(region)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cfg.BootIDFile, []byte("boot-2\n"), 0o644)
	os.RemoveAll(cfg.CDIDir)
	os.RemoveAll(cfg.AccountingRoot)

	restart(t, e, cfg)
	assertPreparedOnly(t, cfg, uid)
	after, err := accounting.ReadFile(region)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Created.After(before.Created) || after.MemoryLimit != 8<<30 {
		t.Errorf("region after reboot: created %v (before %v), limit %d", after.Created, before.Created, after.MemoryLimit)
	}
	cp, _ := mustCheckpoint(t, cfg.StateDir).Load()
	if cp.BootID != "boot-2" {
		t.Errorf("checkpoint boot ID %q, want boot-2", cp.BootID)
	}
}

// TestCorruptCheckpoint: a damaged checkpoint is reported (log and metric)
// and rebuilt from the claims the API server shows allocated and reserved
// on the node; specs of claims it does not know are removed.
func TestCorruptCheckpoint(t *testing.T) {
	e := newEnv(t, "corrupt-node")
	cfg, uid := preparedClaim(t, e, "corrupt-node")
	ckpt := filepath.Join(cfg.StateDir, "checkpoint.json")
	data, _ := os.ReadFile(ckpt)
	data[len(data)/2] ^= 0x20
	os.WriteFile(ckpt, data, 0o600)
	// leftovers of a claim nobody holds
	stray := "11111111-2222-3333-4444-555555555555"
	os.WriteFile(filepath.Join(cfg.CDIDir, cdispec.SpecName(stray)), []byte(`{}`), 0o644)
	os.MkdirAll(filepath.Join(cfg.AccountingRoot, stray), 0o755)

	reg := restart(t, e, cfg)
	assertPreparedOnly(t, cfg, uid)
	if _, err := os.Stat(ckpt + ".corrupt"); err != nil {
		t.Errorf("the corrupt checkpoint was not kept for inspection: %v", err)
	}
	if got := gauge(t, reg, "gpuslice_checkpoint_corruptions_total", nil); got != 1 {
		t.Errorf("gpuslice_checkpoint_corruptions_total = %v, want 1", got)
	}
}

// TestNewerCheckpointRebuilt: a checkpoint in a format newer than this
// plugin reads (a rollback after an upgrade) does not stop the plugin: it
// rebuilds the checkpoint from the API server, as for a corrupt one, keeps
// the newer file beside for inspection, says so in a metric and an Event on
// the Node, and keeps the claim prepared.
func TestNewerCheckpointRebuilt(t *testing.T) {
	e := newEnv(t, "rollback-node")
	cfg, uid := preparedClaim(t, e, "rollback-node")
	ckpt := filepath.Join(cfg.StateDir, checkpoint.Name)
	data, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	newer := bytes.Replace(data, []byte(`"version":"v1"`), []byte(`"version":"v99"`), 1)
	if bytes.Equal(newer, data) {
		t.Fatalf("no version v1 in the checkpoint of one slice: %s", data)
	}
	if err := os.WriteFile(ckpt, newer, 0o600); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(cfg.CDIDir) // the rebuild must restore the spec

	reg := restart(t, e, cfg)
	assertPreparedOnly(t, cfg, uid)
	if kept, _ := os.ReadFile(ckpt + ".unknown-format"); !bytes.Equal(kept, newer) {
		t.Errorf("the newer checkpoint was not kept for inspection: %q", kept)
	}
	if got := gauge(t, reg, "gpuslice_checkpoint_rebuilds_total", map[string]string{"reason": "unknown-format"}); got != 1 {
		t.Errorf("gpuslice_checkpoint_rebuilds_total{reason=unknown-format} = %v, want 1", got)
	}
	if got := gauge(t, reg, "gpuslice_checkpoint_corruptions_total", nil); got != 0 {
		t.Errorf("gpuslice_checkpoint_corruptions_total = %v, want 0: a newer format is not a corrupt file", got)
	}
	events, err := e.client.EventsV1().Events(metav1.NamespaceDefault).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events.Items {
		if ev.Regarding.Name == "rollback-node" && ev.Reason == driver.EventReasonCheckpointRebuilt {
			found = strings.Contains(ev.Note, "unknown-format") && strings.Contains(ev.Note, "1 prepared claims")
			if !found {
				t.Errorf("event note %q does not say why and what was rebuilt", ev.Note)
			}
		}
	}
	if !found {
		t.Errorf("no %s event on the node", driver.EventReasonCheckpointRebuilt)
	}
}

// TestMetrics reads the per-claim and per-GPU series of a prepared claim.
func TestMetrics(t *testing.T) {
	e := newEnv(t, "metrics-node")
	cfg, uid := preparedClaim(t, e, "metrics-node")
	// NVML shows two processes on the GPU: one in the claim's pod using 9 GiB
	// of its 8 GiB (it bypassed the shim), one outside any pod.
	pod, err := e.client.CoreV1().Pods(e.ns).Get(e.ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProcRoot = t.TempDir()
	for pid, cgroup := range map[string]string{
		"4242": "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(string(pod.UID), "-", "_") + ".slice/cri-containerd-0a1b.scope\n",
		"4343": "0::/system.slice/ollama.service\n",
	} {
		os.MkdirAll(filepath.Join(cfg.ProcRoot, pid), 0o755)
		os.WriteFile(filepath.Join(cfg.ProcRoot, pid, "cgroup"), []byte(cgroup), 0o644)
	}
	cfg.NVML.(*server.Server).Devices[0].(*server.Device).GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 9 << 30}, {Pid: 4343, UsedGpuMemory: 1 << 30}}, nvml.SUCCESS
	}
	reg := restart(t, e, cfg)
	claim := map[string]string{"claim_uid": uid, "namespace": e.ns}
	for name, want := range map[string]float64{
		"gpuslice_claim_memory_limit_bytes":     8 << 30,
		"gpuslice_claim_memory_used_bytes":      0,
		"gpuslice_claim_compute_share_percent":  25,
		"gpuslice_claim_region_read_errors":     0,
		"gpuslice_claim_nvml_memory_used_bytes": 9 << 30,
		"gpuslice_claim_over_limit":             1,
	} {
		if got := gauge(t, reg, name, claim); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	gpu := map[string]string{"gpu": "0", "modelName": "Tesla V100-PCIE-32GB", "Hostname": "metrics-node"}
	for name, want := range map[string]float64{
		"DCGM_FI_DEV_FB_FREE": 32768, "DCGM_FI_DEV_FB_USED": 0, "DCGM_FI_DEV_GPU_TEMP": 34, "DCGM_FI_DEV_POWER_USAGE": 26,
		"gpuslice_prepared_claims": 1, "gpuslice_gpus_published": 1,
		"gpuslice_gpu_unattributed_memory_bytes": 1 << 30, "gpuslice_gpu_unattributed_processes": 1,
	} {
		labels := gpu
		if name == "gpuslice_prepared_claims" || name == "gpuslice_gpus_published" {
			labels = nil
		}
		if got := gauge(t, reg, name, labels); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// the claim's pod is gone: the kubelet unprepares, the series go
	cl, err := e.client.ResourceV1().ResourceClaims(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(cl.Items) != 1 {
		t.Fatalf("claims: %v %v", cl, err)
	}
	k, _ := dialKubelet(t, cfg)
	if err := k.Unprepare(e.ctx, &cl.Items[0]); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, reg, "gpuslice_claim_memory_limit_bytes", claim); got != -1 {
		t.Errorf("series of an unprepared claim still reported: %v", got)
	}
}

// gauge returns the value of the first series of name whose labels include
// want, or -1 when there is none.
func gauge(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			if matches(m, want) {
				switch {
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Counter != nil:
					return m.Counter.GetValue()
				}
			}
		}
	}
	return -1
}

func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.Label {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

// TestRestartHostileRegion: the claim's directory is writable in its
// containers, so before the plugin restarts a tenant may put a symlink to a
// host file, a FIFO or garbage where the region was. The plugin runs on the
// host: it must neither follow the symlink (which would chmod 0666 and
// rewrite the host file) nor block on the FIFO, and what one claim's
// processes did must not stop it restoring the node's claims.
func TestRestartHostileRegion(t *testing.T) {
	e := newEnv(t, "hr-node")
	cfg, uid := preparedClaim(t, e, "hr-node")
	region := filepath.Join(cfg.AccountingRoot, uid, contract.RegionFile)
	host := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(host, []byte("root:x:0:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, plant := range []struct {
		name string
		do   func() error
		// fresh: the plugin makes a new region in its place; otherwise it
		// leaves the file to the library
		fresh bool
	}{
		{"symlink to a host file", func() error { return os.Symlink(host, region) }, true},
		{"FIFO", func() error { return syscall.Mkfifo(region, 0o666) }, true},
		{"garbage", func() error { return os.WriteFile(region, bytes.Repeat([]byte("x"), 4096), 0o666) }, false},
	} {
		t.Run(plant.name, func(t *testing.T) {
			if err := os.Remove(region); err != nil {
				t.Fatal(err)
			}
			if err := plant.do(); err != nil {
				t.Fatal(err)
			}
			restart(t, e, cfg) // refused to start before, on each of them
			if _, err := os.Stat(filepath.Join(cfg.CDIDir, cdispec.SpecName(uid))); err != nil {
				t.Errorf("the claim's spec after the restart: %v", err)
			}
			if cp, err := mustCheckpoint(t, cfg.StateDir).Load(); err != nil || cp.Claims[uid].State != checkpoint.PrepareCompleted {
				t.Errorf("the checkpoint after the restart: %v, %v; want the claim completed", cp, err)
			}
			st, err := os.Lstat(region)
			if err != nil {
				t.Fatal(err)
			}
			if plant.fresh {
				if r, err := accounting.ReadFile(region); err != nil || r.MemoryLimit != 8<<30 {
					t.Errorf("the region after the restart: %v, %v; want a fresh region", r, err)
				}
			} else if !st.Mode().IsRegular() {
				t.Errorf("the region after the restart is %v", st.Mode())
			}
		})
	}
	if st, err := os.Stat(host); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the host file's mode: %v, %v; want 0600 unchanged", st, err)
	}
	if b, _ := os.ReadFile(host); string(b) != "root:x:0:0" {
		t.Errorf("the host file was rewritten: %q", b)
	}
}
