package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

const v100Memory = 32 << 30

// TestMultiGPUClaim walks a claim of four whole GPUs (one request, count 4
// of the 100 % class) from the scheduler's allocation through prepare,
// a repeated prepare, a reboot, the metrics and unprepare: one CDI spec with
// every GPU, one accounting region with the four GPUs' memory and no
// pacing, four devices in the checkpoint, the answer and the claim's status.
func TestMultiGPUClaim(t *testing.T) {
	node := "multi-node"
	e := newEnv(t, node)
	p, cfg := e.startPlugin(node, 4)
	e.waitSlices(node, 4*7)
	var uuids []string
	for _, g := range p.GPUs() {
		uuids = append(uuids, g.UUID)
	}
	claimName := e.runPodN("train", e.class(100), node, 4)
	cl, _ := e.placement("train", claimName, true)
	uid := string(cl.UID)
	var allocated []string
	for _, r := range cl.Status.Allocation.Devices.Results {
		allocated = append(allocated, r.Device)
	}
	slices.Sort(allocated)
	if want := []string{"gpu-0-100pct-1", "gpu-1-100pct-1", "gpu-2-100pct-1", "gpu-3-100pct-1"}; !slices.Equal(allocated, want) {
		t.Fatalf("allocated %v, want the four GPUs %v", allocated, want)
	}

	k, err := dialKubelet(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := k.PrepareDevices(e.ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var answered []string
	for _, d := range devs[uid] {
		if !slices.Equal(d.RequestNames, []string{"gpu"}) || d.PoolName != node || !slices.Equal(d.CdiDeviceIds, []string{cdispec.DeviceID(uid)}) {
			t.Errorf("device %+v: want request gpu, pool %s and the claim's CDI device", d, node)
		}
		answered = append(answered, d.DeviceName)
	}
	slices.Sort(answered)
	if !slices.Equal(answered, allocated) {
		t.Errorf("prepare answered devices %v, want %v", answered, allocated)
	}
	again, err := k.PrepareDevices(e.ctx, cl)
	if err != nil || len(again[uid]) != 4 {
		t.Fatalf("second prepare: %v, %v; want the same four devices", again, err)
	}
	assertWholeGPUs(t, cfg, uid, uuids)

	// Each GPU in the claim's status, with its own memory.
	statuses := e.deviceStatuses(cl, 4)
	var reported []string
	for _, s := range statuses {
		if s.MemoryLimitBytes != v100Memory || s.ComputeSharePercent != 100 || s.CDIDevice != cdispec.DeviceID(uid) {
			t.Errorf("device status %+v: want 32 GiB, 100 %% and the claim's CDI device", s)
		}
		reported = append(reported, s.GPUUUID)
	}
	slices.Sort(reported)
	if !slices.Equal(reported, uuids) {
		t.Errorf("status reports GPUs %v, want %v", reported, uuids)
	}

	// A reboot: the spec and the region come back from the checkpoint. NVML
	// shows a process of the claim's pod on GPU 2, charged to the claim there.
	p.Stop()
	os.WriteFile(cfg.BootIDFile, []byte("boot-2\n"), 0o644)
	os.RemoveAll(cfg.CDIDir)
	os.RemoveAll(cfg.AccountingRoot)
	pod, err := e.client.CoreV1().Pods(e.ns).Get(e.ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProcRoot = t.TempDir()
	os.MkdirAll(filepath.Join(cfg.ProcRoot, "4242"), 0o755)
	os.WriteFile(filepath.Join(cfg.ProcRoot, "4242", "cgroup"), []byte("0::/kubepods/pod"+string(pod.UID)+"/0a1b\n"), 0o644)
	for i, d := range cfg.NVML.(*server.Server).Devices {
		var procs []nvml.ProcessInfo
		if i == 2 {
			procs = []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 20 << 30}}
		}
		d.(*server.Device).GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return procs, nvml.SUCCESS }
	}
	reg := restart(t, e, cfg)
	assertPreparedOnly(t, cfg, uid)
	assertWholeGPUs(t, cfg, uid, uuids)
	claim := map[string]string{"claim_uid": uid}
	if got := gauge(t, reg, "gpuslice_claim_memory_limit_bytes", claim); got != 4*v100Memory {
		t.Errorf("gpuslice_claim_memory_limit_bytes = %v, want the four GPUs' memory", got)
	}
	for i, u := range uuids {
		perGPU := map[string]string{"claim_uid": uid, "UUID": u}
		want := 0.0
		if i == 2 {
			want = 20 << 30
		}
		if got := gauge(t, reg, "gpuslice_claim_nvml_memory_used_bytes", perGPU); got != want {
			t.Errorf("GPU %d: gpuslice_claim_nvml_memory_used_bytes = %v, want %v", i, got, want)
		}
		if got := gauge(t, reg, "gpuslice_claim_over_limit", perGPU); got != 0 {
			t.Errorf("GPU %d: gpuslice_claim_over_limit = %v, want 0 (20 GiB of a 32 GiB GPU)", i, got)
		}
	}

	k2, err := dialKubelet(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := k2.Unprepare(e.ctx, cl); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, cfg.CDIDir, cfg.AccountingRoot)
	if cp, err := mustCheckpoint(t, cfg.StateDir).Load(); err != nil || len(cp.Claims) != 0 {
		t.Errorf("checkpoint after unprepare: %+v, %v; want empty", cp, err)
	}
}

// assertWholeGPUs checks the node's record of a claim of whole GPUs: the
// spec has every GPU's device node and UUID and the four GPUs' memory as
// the budget without pacing, the region says the same, the checkpoint
// holds the four devices.
func assertWholeGPUs(t *testing.T, cfg driver.Config, uid string, uuids []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cfg.CDIDir, cdispec.SpecName(uid)))
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Devices) != 1 {
		t.Fatalf("spec devices %+v, want the claim's one", spec.Devices)
	}
	edits := spec.Devices[0].ContainerEdits
	var nodes []string
	for _, n := range edits.DeviceNodes {
		nodes = append(nodes, n.Path)
	}
	for _, want := range []string{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3", "/dev/nvidiactl"} {
		if !slices.Contains(nodes, want) {
			t.Errorf("spec device nodes %v lack %s", nodes, want)
		}
	}
	var visible string
	for _, env := range edits.Env {
		if v, ok := strings.CutPrefix(env, "CUDA_VISIBLE_DEVICES="); ok {
			visible = v
		}
	}
	got := strings.Split(visible, ",")
	slices.Sort(got)
	if !slices.Equal(got, uuids) {
		t.Errorf("CUDA_VISIBLE_DEVICES=%s, want the GPUs %v", visible, uuids)
	}
	for _, want := range []string{"GPUSLICE_MEMORY_LIMIT=137438953472", "GPUSLICE_COMPUTE_SHARE=100", "NVIDIA_VISIBLE_DEVICES=" + visible} {
		if !slices.Contains(edits.Env, want) {
			t.Errorf("spec env lacks %s: %v", want, edits.Env)
		}
	}
	region, err := accounting.ReadFile(filepath.Join(cfg.AccountingRoot, uid, contract.RegionFile))
	if err != nil {
		t.Fatal(err)
	}
	if region.MemoryLimit != 4*v100Memory || region.ComputeShare != 100 {
		t.Errorf("region: limit %d, share %d; want the four GPUs' memory and 100", region.MemoryLimit, region.ComputeShare)
	}
	cp, err := mustCheckpoint(t, cfg.StateDir).Load()
	if err != nil {
		t.Fatal(err)
	}
	c := cp.Claims[uid]
	if c.State != checkpoint.PrepareCompleted || len(c.Devices) != 4 {
		t.Fatalf("checkpoint entry %+v, want four devices completed", c)
	}
	for _, d := range c.Devices {
		if d.Fraction != 100 || d.MemoryBytes != v100Memory || d.Request != "gpu" || d.Pool != cfg.NodeName {
			t.Errorf("checkpoint device %+v", d)
		}
	}
}

// deviceStatuses waits for the plugin's entries for n devices in the
// claim's status.devices.
func (e *env) deviceStatuses(cl *resourcev1.ResourceClaim, n int) []driver.SliceStatus {
	e.tb.Helper()
	var got []driver.SliceStatus
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := e.client.ResourceV1().ResourceClaims(cl.Namespace).Get(ctx, cl.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = nil
		for _, d := range c.Status.Devices {
			if d.Driver != contract.DriverName || d.Data == nil || len(d.Conditions) != 1 || d.Conditions[0].Type != driver.ConditionPrepared {
				continue
			}
			var s driver.SliceStatus
			if err := json.Unmarshal(d.Data.Raw, &s); err != nil {
				return false, err
			}
			got = append(got, s)
		}
		return len(got) == n, nil
	})
	if err != nil {
		e.tb.Fatalf("claim %s/%s: %d of %d device statuses from the plugin: %v", cl.Namespace, cl.Name, len(got), n, err)
	}
	return got
}

// TestMultiDeviceRefused: claims the engine never renders, written by hand,
// are refused with the reason and leave nothing on the node: two devices
// on one GPU, and a whole GPU together with a slice (each request one
// slice of its package).
func TestMultiDeviceRefused(t *testing.T) {
	node := "refuse-node"
	e := newEnv(t, node)
	_, cfg := e.startPlugin(node, 2)
	e.waitSlices(node, 2*7)
	k, err := dialKubelet(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	half, whole := e.class(50), e.class(100)
	for name, tc := range map[string]struct {
		requests []handRequest
		want     string
	}{
		"one-gpu": {[]handRequest{{half, "gpu-0-50pct-1"}, {half, "gpu-0-50pct-2"}}, "both on GPU"},
		"mixed":   {[]handRequest{{whole, "gpu-0-100pct-1"}, {half, "gpu-1-50pct-1"}}, "gpu-1-50pct-1 is a 50% slice"},
	} {
		cl := e.handAllocated(name, node, tc.requests...)
		_, err := k.Prepare(e.ctx, cl)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: prepare returned %v, want a refusal saying %q", name, err, tc.want)
		}
	}
	assertNothingLeft(t, cfg.CDIDir, cfg.AccountingRoot)
	if cp, err := mustCheckpoint(t, cfg.StateDir).Load(); err != nil || len(cp.Claims) != 0 {
		t.Errorf("checkpoint after refusals: %+v, %v; want empty", cp, err)
	}
}

// handRequest is one request of a hand-allocated claim: its class, and the
// device written as its allocation.
type handRequest struct{ class, device string }

// handAllocated creates a claim of one request per handRequest (gpu0,
// gpu1, …) and writes its allocation by hand (as a person or another
// controller might), the devices from node's pool.
func (e *env) handAllocated(name, node string, requests ...handRequest) *resourcev1.ResourceClaim {
	e.tb.Helper()
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	alloc := &resourcev1.AllocationResult{}
	for i, r := range requests {
		req := fmt.Sprintf("gpu%d", i)
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourcev1.DeviceRequest{
			Name: req, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: r.class, Count: 1},
		})
		alloc.Devices.Results = append(alloc.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: req, Driver: contract.DriverName, Pool: node, Device: r.device,
		})
	}
	cl, err := e.client.ResourceV1().ResourceClaims(e.ns).Create(e.ctx, claim, metav1.CreateOptions{})
	if err != nil {
		e.tb.Fatal(err)
	}
	cl.Status.Allocation = alloc
	cl, err = e.client.ResourceV1().ResourceClaims(e.ns).UpdateStatus(e.ctx, cl, metav1.UpdateOptions{})
	if err != nil {
		e.tb.Fatal(err)
	}
	return cl
}
