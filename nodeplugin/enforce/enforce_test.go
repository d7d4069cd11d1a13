package enforce_test

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuslice/gpuslice/nodeplugin/enforce"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

const MiB, GiB = 1 << 20, 1 << 30

// node is a GPU node on go-nvml's mock: processes per GPU (what NVML
// lists), each process's pod, and what the enforcer stopped.
type node struct {
	mu      sync.Mutex
	procs   map[string][]nvml.ProcessInfo // by GPU UUID
	pods    map[uint32]string
	stopped []uint32
	broken  map[string]bool // GPUs whose process list fails
}

func newNode() *node {
	return &node{procs: map[string][]nvml.ProcessInfo{}, pods: map[uint32]string{}, broken: map[string]bool{}}
}

func (n *node) run(gpu string, pid uint32, pod string, used uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pods[pid] = pod
	for i, p := range n.procs[gpu] {
		if p.Pid == pid {
			n.procs[gpu][i].UsedGpuMemory = used
			return
		}
	}
	n.procs[gpu] = append(n.procs[gpu], nvml.ProcessInfo{Pid: pid, UsedGpuMemory: used})
}

func (n *node) nvml() nvml.Interface {
	return &mock.Interface{DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
		return &mock.Device{GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.broken[uuid] {
				return nil, nvml.ERROR_UNKNOWN
			}
			return slices.Clone(n.procs[uuid]), nvml.SUCCESS
		}}, nvml.SUCCESS
	}}
}

// stop is the enforcer's Stop: the process leaves NVML's list, as a killed
// process's memory is freed.
func (n *node) stop(pid uint32, pod string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pods[pid] != pod {
		return enforce.ErrGone
	}
	n.stopped = append(n.stopped, pid)
	for gpu, ps := range n.procs {
		n.procs[gpu] = slices.DeleteFunc(ps, func(p nvml.ProcessInfo) bool { return p.Pid == pid })
	}
	return nil
}

func (n *node) enforcer(t *testing.T, claims []enforce.Claim, gpus ...string) (*enforce.Enforcer, *prometheus.Registry, *[]enforce.Kill) {
	reg := prometheus.NewPedanticRegistry()
	var kills []enforce.Kill
	e := enforce.New(enforce.Config{
		NVML: n.nvml(), GPUs: gpus, Claims: func() []enforce.Claim { return claims },
		PodOf: func(pid uint32) string { n.mu.Lock(); defer n.mu.Unlock(); return n.pods[pid] },
		Stop:  n.stop, OnKill: func(k enforce.Kill) { kills = append(kills, k) }, Registerer: reg,
	})
	t.Cleanup(e.Close)
	return e, reg, &kills
}

func limitsFile(t *testing.T, limit uint64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), accounting.LimitsFile)
	if err := accounting.WriteLimits(path, accounting.Limits{MemoryLimit: limit, ComputeShare: 25, ComputeWindow: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	return path
}

func observed(t *testing.T, path string) accounting.Limits {
	t.Helper()
	l, err := accounting.ReadLimits(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A claim over its limit loses the process that grew most since the last
// sample, and only as many processes as bring it under; the other claim on
// the GPU and processes outside claims are untouched; the kill is counted
// and reported; the observation lands in each claim's limits file.
func TestStopsTheProcessThatGrewMost(t *testing.T) {
	n := newNode()
	a := enforce.Claim{UID: "a", Namespace: "team-a", Name: "slice", PodUIDs: []string{"pod-a"}, GPUs: []enforce.GPU{{UUID: "GPU-0", Limit: 8 * GiB}}, LimitsFile: limitsFile(t, 8*GiB)}
	b := enforce.Claim{UID: "b", Namespace: "team-b", Name: "slice", PodUIDs: []string{"pod-b"}, GPUs: []enforce.GPU{{UUID: "GPU-0", Limit: 8 * GiB}}, LimitsFile: limitsFile(t, 8*GiB)}
	e, reg, kills := n.enforcer(t, []enforce.Claim{a, b}, "GPU-0")

	n.run("GPU-0", 100, "pod-a", 3*GiB) // a's big, steady process
	n.run("GPU-0", 101, "pod-a", 1*GiB) // a's process that will grow
	n.run("GPU-0", 102, "pod-a", 2*GiB) // a's other steady process
	n.run("GPU-0", 200, "pod-b", 7*GiB) // b, near its limit
	n.run("GPU-0", 300, "", 10*GiB)     // not in a pod of a claim
	if got := e.Sample(); len(got) != 0 {
		t.Fatalf("kills within the limits: %+v", got)
	}
	if l := observed(t, a.LimitsFile); l.ObservedUsed != 6*GiB || l.ObservedSeq != 2 {
		t.Errorf("claim a observed %d (seq %d), want 6 GiB", l.ObservedUsed, l.ObservedSeq)
	}
	if l := observed(t, b.LimitsFile); l.ObservedUsed != 7*GiB {
		t.Errorf("claim b observed %d, want 7 GiB", l.ObservedUsed)
	}

	n.run("GPU-0", 101, "pod-a", 4*GiB) // grew 3 GiB: a now holds 9 GiB of 8
	n.run("GPU-0", 102, "pod-a", 2*GiB+512*MiB)
	got := e.Sample()
	if len(got) != 1 || got[0].Process.PID != 101 || got[0].Err != nil {
		t.Fatalf("kills %+v, want only pid 101 (grew most)", got)
	}
	k := got[0]
	if k.Claim.UID != "a" || k.GPU != "GPU-0" || k.PodUID != "pod-a" || k.Limit != 8*GiB || k.ClaimUsed != 9*GiB+512*MiB ||
		k.Process.Used != 4*GiB || k.Process.Grew != 3*GiB || k.At.Before(k.Sampled) {
		t.Errorf("kill %+v", k)
	}
	if len(*kills) != 1 || (*kills)[0].Process.PID != 101 {
		t.Errorf("OnKill told %+v", *kills)
	}
	if !slices.Equal(n.stopped, []uint32{101}) {
		t.Errorf("stopped %v, want [101]", n.stopped)
	}
	if l := observed(t, a.LimitsFile); l.ObservedUsed != 5*GiB+512*MiB {
		t.Errorf("claim a observed %d after the kill, want what is left, 5.5 GiB", l.ObservedUsed)
	}
	if v := counter(t, reg, "a"); v != 1 {
		t.Errorf("kills counted for claim a: %v", v)
	}
	if v := counter(t, reg, "b"); v != 0 {
		t.Errorf("kills counted for claim b: %v", v)
	}

	// the one that grew most goes, and no more than needed
	n.run("GPU-0", 103, "pod-a", 2*GiB)
	n.run("GPU-0", 104, "pod-a", 3*GiB) // a: 3 + 2.5 + 2 + 3 = 10.5 GiB
	if pids := stoppedBy(e.Sample()); !slices.Equal(pids, []uint32{104}) {
		t.Errorf("stopped %v, want only 104 (grew 3 GiB; 7.5 GiB are left)", pids)
	}
	// two needed: one at a time until the claim is under
	n.run("GPU-0", 105, "pod-a", 3*GiB)
	n.run("GPU-0", 106, "pod-a", 3*GiB) // a: 7.5 + 6 = 13.5 GiB
	if pids := stoppedBy(e.Sample()); !slices.Equal(pids, []uint32{105, 106}) {
		t.Errorf("stopped %v, want 105 and 106", pids)
	}
	if v := counter(t, reg, "a"); v != 4 {
		t.Errorf("kills counted for claim a: %v, want 4", v)
	}
	if l := observed(t, b.LimitsFile); l.ObservedUsed != 7*GiB || l.ObservedSeq != 8 {
		t.Errorf("claim b observed %d (seq %d), want its 7 GiB, unchanged, at every sample", l.ObservedUsed, l.ObservedSeq)
	}
}

func stoppedBy(kills []enforce.Kill) []uint32 {
	var pids []uint32
	for _, k := range kills {
		pids = append(pids, k.Process.PID)
	}
	return pids
}

func counter(t *testing.T, reg *prometheus.Registry, claim string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != "gpuslice_claim_enforcer_kills_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "claim_uid" && l.GetValue() == claim {
					v += m.GetCounter().GetValue()
				}
			}
		}
	}
	return v
}

// A time-sliced claim (no limit) and a MIG GPU are not the enforcer's: a
// time-sliced claim's processes are not stopped whatever they hold, and
// a GPU not listed (MIG mode) is not read.
func TestSkipsWhatItDoesNotHold(t *testing.T) {
	n := newNode()
	sliced := enforce.Claim{UID: "ts", Namespace: "t", Name: "shared", PodUIDs: []string{"pod-ts"}, GPUs: []enforce.GPU{{UUID: "GPU-0"}}}
	onMIG := enforce.Claim{UID: "m", Namespace: "t", Name: "mig", PodUIDs: []string{"pod-m"}, GPUs: []enforce.GPU{{UUID: "GPU-MIG", Limit: GiB}}}
	e, _, _ := n.enforcer(t, []enforce.Claim{sliced, onMIG}, "GPU-0")
	n.run("GPU-0", 1, "pod-ts", 30*GiB)
	n.run("GPU-MIG", 2, "pod-m", 5*GiB)
	if got := e.Sample(); len(got) != 0 {
		t.Errorf("kills %+v, want none", got)
	}
}

// A kill that fails is reported and stops the round: the next process is
// not stopped for this one's memory.
func TestFailedStopIsNotCascaded(t *testing.T) {
	n := newNode()
	c := enforce.Claim{UID: "a", Namespace: "t", Name: "s", PodUIDs: []string{"pod"}, GPUs: []enforce.GPU{{UUID: "GPU-0", Limit: 4 * GiB}}}
	reg := prometheus.NewPedanticRegistry()
	var told []enforce.Kill
	e := enforce.New(enforce.Config{NVML: n.nvml(), GPUs: []string{"GPU-0"}, Claims: func() []enforce.Claim { return []enforce.Claim{c} },
		PodOf: func(pid uint32) string { return "pod" }, Stop: func(uint32, string) error { return errors.New("operation not permitted") },
		OnKill: func(k enforce.Kill) { told = append(told, k) }, Registerer: reg})
	n.run("GPU-0", 1, "pod", 3*GiB)
	n.run("GPU-0", 2, "pod", 3*GiB)
	got := e.Sample()
	if len(got) != 1 || got[0].Err == nil || len(told) != 1 {
		t.Errorf("kills %+v, told %+v: want one failed attempt", got, told)
	}
}

// A GPU whose process list cannot be read leaves its claims' observations
// as they were: the shim keeps the last one rather than a false zero.
func TestUnreadableGPUKeepsObservation(t *testing.T) {
	n := newNode()
	c := enforce.Claim{UID: "a", Namespace: "t", Name: "s", PodUIDs: []string{"pod"}, GPUs: []enforce.GPU{{UUID: "GPU-0", Limit: 8 * GiB}}, LimitsFile: limitsFile(t, 8*GiB)}
	e, _, _ := n.enforcer(t, []enforce.Claim{c}, "GPU-0")
	n.run("GPU-0", 1, "pod", 5*GiB)
	e.Sample()
	n.broken["GPU-0"] = true
	e.Sample()
	if l := observed(t, c.LimitsFile); l.ObservedUsed != 5*GiB || l.ObservedSeq != 2 {
		t.Errorf("observation after an unreadable sample: %d bytes, seq %d; want the last one, 5 GiB, seq 2", l.ObservedUsed, l.ObservedSeq)
	}
}

// An enforcer that stops (the plugin's upgrade or rollback) withdraws its
// observations: left behind, one would hold the claim's processes to
// memory freed after it for as long as no plugin samples.
func TestStoppedEnforcerWithdrawsObservations(t *testing.T) {
	n := newNode()
	c := enforce.Claim{UID: "a", Namespace: "t", Name: "s", PodUIDs: []string{"pod"}, GPUs: []enforce.GPU{{UUID: "GPU-0", Limit: 8 * GiB}}, LimitsFile: limitsFile(t, 8*GiB)}
	e, _, _ := n.enforcer(t, []enforce.Claim{c}, "GPU-0")
	n.run("GPU-0", 1, "pod", 5*GiB)
	e.Sample()
	if l := observed(t, c.LimitsFile); l.ObservedUsed != 5*GiB || l.Observed.IsZero() {
		t.Fatalf("observation while running: %d bytes at %v; want 5 GiB at the sample's time", l.ObservedUsed, l.Observed)
	}
	e.Close()
	if l := observed(t, c.LimitsFile); l.ObservedUsed != 0 || !l.Observed.IsZero() || l.ObservedSeq != 4 {
		t.Errorf("observation after the enforcer stopped: %d bytes at %v, seq %d; want none (0 bytes, no time) under seq 4", l.ObservedUsed, l.Observed, l.ObservedSeq)
	}
}

// A claim of two whole GPUs: each GPU holds it to that GPU's memory, and
// its observation is both GPUs' memory together (its one budget).
func TestWholeGPUsObservedTogether(t *testing.T) {
	n := newNode()
	c := enforce.Claim{UID: "w", Namespace: "t", Name: "two", PodUIDs: []string{"pod"},
		GPUs: []enforce.GPU{{UUID: "GPU-0", Limit: 32 * GiB}, {UUID: "GPU-1", Limit: 32 * GiB}}, LimitsFile: limitsFile(t, 64*GiB)}
	e, _, _ := n.enforcer(t, []enforce.Claim{c}, "GPU-0", "GPU-1")
	n.run("GPU-0", 1, "pod", 30*GiB)
	n.run("GPU-1", 2, "pod", 20*GiB)
	if got := e.Sample(); len(got) != 0 {
		t.Errorf("kills %+v", got)
	}
	if l := observed(t, c.LimitsFile); l.ObservedUsed != 50*GiB {
		t.Errorf("observed %d, want both GPUs' 50 GiB", l.ObservedUsed)
	}
}
