package gpuproof_test

// make gpu-proof runs on GPU machines without Go, so it does in Python what
// the node plugin does in Go: discovery, the claim's accounting files, the
// enforcer and the claim's container. These tests hold each to the
// plugin's own code, on the same inputs.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/enforce"
	"github.com/gpuslice/gpuslice/nodeplugin/shim"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// python runs one of the proof's Python files with env added and returns
// its standard output.
func python(t *testing.T, env []string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("python3", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python3 %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// The claim's limits file and region that gpu-proof writes are the bytes
// (and modes) the plugin's prepare writes for the same claim, and the
// observation its Python enforcer writes is the one the Go enforcer writes.
func TestPluginFilesMatchAccounting(t *testing.T) {
	prerequisites(t, "python3")
	window := shim.DefaultComputeWindowMS * time.Millisecond
	for _, c := range []struct {
		limit   uint64
		share   uint32
		created int64
	}{{8 << 30, 25, 1_765_000_000_123_456_789}, {3<<30 + 512<<20, 37, 1}, {32 << 30, 100, 1_800_000_000_000_000_000}} {
		py, gd := t.TempDir(), t.TempDir()
		python(t, nil, nil, "plugin_files.py", "write", py, "--limit", strconv.FormatUint(c.limit, 10), "--share", strconv.FormatUint(uint64(c.share), 10),
			"--created-ns", strconv.FormatInt(c.created, 10))
		// as nodeplugin/driver's createAccounting writes them
		created := time.Unix(0, c.created)
		if err := accounting.WriteLimits(filepath.Join(gd, accounting.LimitsFile), accounting.Limits{
			MemoryLimit: c.limit, ComputeShare: c.share, ComputeWindow: window,
			SamplePeriod: enforce.Period, ContextOverhead: shim.DefaultContextOverhead, Created: created,
		}); err != nil {
			t.Fatal(err)
		}
		region := filepath.Join(gd, "gpuslice.region")
		if err := accounting.Create(region, c.limit, c.share, false, window); err != nil {
			t.Fatal(err)
		}
		sameFile(t, filepath.Join(py, accounting.LimitsFile), filepath.Join(gd, accounting.LimitsFile), nil)
		// Create stamps the region with the time it runs: the Python one is
		// compared with Create's file, and with Encode at its own time
		sameFile(t, filepath.Join(py, "gpuslice.region"), region, func(b []byte) { copy(b[40:48], make([]byte, 8)) })
		got, _ := os.ReadFile(filepath.Join(py, "gpuslice.region"))
		if want := accounting.Encode(c.limit, c.share, false, window, created); !bytes.Equal(got, want) {
			t.Errorf("limit %d share %d: the Python region differs from accounting.Encode's", c.limit, c.share)
		}

		at := time.Unix(0, c.created+200_000_000)
		o, err := accounting.OpenObserver(filepath.Join(gd, accounting.LimitsFile))
		if err != nil {
			t.Fatal(err)
		}
		o.Observe(c.limit/3, at)
		o.Close()
		python(t, nil, nil, "plugin_files.py", "observe", filepath.Join(py, accounting.LimitsFile), "--used", strconv.FormatUint(c.limit/3, 10),
			"--at-ns", strconv.FormatInt(at.UnixNano(), 10))
		sameFile(t, filepath.Join(py, accounting.LimitsFile), filepath.Join(gd, accounting.LimitsFile), nil)
		l, err := accounting.ReadLimits(filepath.Join(py, accounting.LimitsFile))
		if err != nil || l.ObservedUsed != c.limit/3 || l.ObservedSeq != 2 || !l.Observed.Equal(at) || l.MemoryLimit != c.limit {
			t.Errorf("the Python limits file read by the plugin: %+v, %v", l, err)
		}
	}
}

// sameFile fails unless the files at a (Python's) and b (Go's) have the same
// bytes (after mask, if any, on both) and the same mode.
func sameFile(t *testing.T, a, b string, mask func([]byte)) {
	t.Helper()
	ab, err1 := os.ReadFile(a)
	bb, err2 := os.ReadFile(b)
	if err1 != nil || err2 != nil {
		t.Fatalf("read %s, %s: %v, %v", a, b, err1, err2)
	}
	if mask != nil {
		mask(ab)
		mask(bb)
	}
	if !bytes.Equal(ab, bb) {
		for i := range min(len(ab), len(bb)) {
			if ab[i] != bb[i] {
				t.Errorf("%s differs from the plugin's %s at byte %d (%d bytes and %d)", filepath.Base(a), b, i, len(ab), len(bb))
				return
			}
		}
		t.Errorf("%s is %d bytes, the plugin's %d", filepath.Base(a), len(ab), len(bb))
	}
	sa, _ := os.Stat(a)
	sb, _ := os.Stat(b)
	if sa.Mode() != sb.Mode() {
		t.Errorf("%s: mode %v, the plugin's %v", filepath.Base(a), sa.Mode(), sb.Mode())
	}
}

// fakeNVML builds the simulated libnvidia-ml.so.1 of nodeplugin/shim/fake
// and returns its directory.
func fakeNVML(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	lib := filepath.Join(out, "fake", "libnvidia-ml.so.1")
	if b, err := exec.Command("make", "-s", "-C", "../shim", "OUT="+out, lib).CombinedOutput(); err != nil {
		t.Fatalf("build the fake libnvidia-ml.so.1: %v\n%s", err, b)
	}
	return filepath.Join(out, "fake")
}

type pyGPU struct {
	Index             int    `json:"index"`
	UUID              string `json:"uuid"`
	Name              string `json:"name"`
	MemoryBytes       uint64 `json:"memoryBytes"`
	MemorySource      string `json:"memorySource"`
	CCMajor           int    `json:"ccMajor"`
	CCMinor           int    `json:"ccMinor"`
	Architecture      string `json:"architecture"`
	PCIBusID          string `json:"pciBusId"`
	Minor             int    `json:"minor"`
	MIGEnabled        bool   `json:"migEnabled"`
	DriverVersion     string `json:"driverVersion"`
	CUDADriverVersion string `json:"cudaDriverVersion"`
}

// The GPU gpu-proof discovers is the one nodeplugin/discovery discovers
// through go-nvml on the same simulated library: every field, on a GPU
// and on a GPU in MIG mode. The driver reserves memory, so v1's total and
// v2's usable memory differ, and reading the other one than the plugin
// fails.
func TestDiscoveryMatchesNodePlugin(t *testing.T) {
	prerequisites(t, "gcc", "make", "python3")
	fake := fakeNVML(t)
	lib := nvml.New(nvml.WithLibraryPath(filepath.Join(fake, "libnvidia-ml.so.1")))
	const reserved = 423 << 20
	for _, mig := range []bool{false, true} {
		env := []string{"LD_LIBRARY_PATH=" + fake, "FAKEGPU_STATE=" + filepath.Join(t.TempDir(), "state"),
			"FAKEGPU_RESERVED_BYTES=" + strconv.Itoa(reserved)}
		if mig {
			env = append(env, "FAKEGPU_MIG_UUID=MIG-5f0c0dd8-0000-4000-8000-000000000001", "FAKEGPU_MIG_PROFILE=1g.5gb",
				"FAKEGPU_MIG_MEMORY=5100273664", "FAKEGPU_NAME=NVIDIA A100-SXM4-40GB", "FAKEGPU_COMPUTE_CAPABILITY=8.0")
		}
		for _, e := range env {
			k, v, _ := strings.Cut(e, "=")
			t.Setenv(k, v)
		}
		if ret := lib.Init(); ret != nvml.SUCCESS {
			t.Fatalf("nvml init on the fake: %v", ret)
		}
		res, err := discovery.Discover(lib)
		var v1 nvml.Memory
		if !mig {
			dev, _ := lib.DeviceGetHandleByIndex(0)
			v1, _ = dev.GetMemoryInfo()
		}
		lib.Shutdown()
		if err != nil {
			t.Fatal(err)
		}
		if !mig && (len(res.GPUs) != 1 || res.GPUs[0].MemorySource != discovery.MemoryNVMLv2 || res.GPUs[0].MemoryBytes != v1.Total-reserved) {
			t.Fatalf("the node plugin discovered %+v: want one GPU with v1's total %d less the %d reserved, from v2", res.GPUs, v1.Total, reserved)
		}
		var got struct {
			GPUs    []pyGPU             `json:"gpus"`
			Skipped []discovery.Skipped `json:"skipped"`
		}
		if err := json.Unmarshal(python(t, env, nil, "nvml.py", "discover"), &got); err != nil {
			t.Fatal(err)
		}
		var want []pyGPU
		for _, g := range res.GPUs {
			want = append(want, pyGPU{Index: g.Index, UUID: g.UUID, Name: g.Name, MemoryBytes: g.MemoryBytes, MemorySource: g.MemorySource, CCMajor: g.CCMajor,
				CCMinor: g.CCMinor, Architecture: g.Architecture, PCIBusID: g.PCIBusID, Minor: g.Minor, MIGEnabled: g.MIGEnabled,
				DriverVersion: g.DriverVersion, CUDADriverVersion: g.CUDADriverVersion})
		}
		// the simulated GPU in MIG mode is what a MIG claim's container
		// sees: its memory is the instance's, and the GPU's cannot be read
		if len(want)+len(res.Skipped) != 1 || !slices.Equal(got.GPUs, want) || !slices.Equal(got.Skipped, res.Skipped) {
			t.Errorf("MIG %v: gpu-proof discovered %+v (skipped %+v), the node plugin %+v (skipped %+v)", mig, got.GPUs, got.Skipped, want, res.Skipped)
		}
	}
}

// replayedKill and replayed are one sample's decisions: each kill, and each
// claim's observation (observed_used, observed_seq) in its limits file.
type replayedKill struct {
	Claim     string `json:"claim"`
	GPU       string `json:"gpu"`
	PID       uint32 `json:"pid"`
	Used      uint64 `json:"used"`
	Grew      uint64 `json:"grew"`
	ClaimUsed uint64 `json:"claimUsed"`
	Limit     uint64 `json:"limit"`
	Gone      bool   `json:"gone"`
}

type replayed struct {
	Kills    []replayedKill       `json:"kills"`
	Observed map[string][2]uint64 `json:"observed"`
}

type sample struct {
	Processes  map[string][][2]uint64 `json:"processes"`
	Unreadable []string               `json:"unreadable,omitempty"`
	Gone       []uint32               `json:"gone,omitempty"`
}

type scenarioClaim struct {
	UID        string            `json:"uid"`
	Pods       []string          `json:"pods"`
	GPUs       map[string]uint64 `json:"gpus"`
	LimitsFile string            `json:"limits_file"`
}

// The enforcer gpu-proof runs makes the node plugin's decisions: the same
// NVML process lists, replayed through both, give the same kills (which
// process, in which order, the claim's memory then, a process gone before
// its signal) and the same observations in the claims' limits files: two
// claims, one on two GPUs, processes of no pod and of another pod, growth
// and ties, a process stopped and still listed, a GPU whose processes
// cannot be read.
func TestEnforcerMatchesNodePlugin(t *testing.T) {
	prerequisites(t, "python3")
	ps := func(p ...uint64) [][2]uint64 {
		var out [][2]uint64
		for i := 0; i < len(p); i += 2 {
			out = append(out, [2]uint64{p[i], p[i+1]})
		}
		return out
	}
	pods := map[uint32]string{10: "pa", 11: "pa", 12: "pa", 13: "pa", 14: "pa", 20: "pb", 21: "pb", 40: "pz"}
	samples := []sample{
		{Processes: map[string][][2]uint64{"g1": ps(10, 400, 11, 500, 20, 1000, 30, 5000), "g2": ps(21, 300)}},
		{Processes: map[string][][2]uint64{"g1": ps(10, 400, 11, 800, 20, 1000, 30, 5000, 40, 100), "g2": ps(21, 600)}},
		{Processes: map[string][][2]uint64{"g1": ps(10, 400, 11, 800, 20, 2500)}, Unreadable: []string{"g2"}},
		{Processes: map[string][][2]uint64{"g1": ps(10, 1200)}, Gone: []uint32{10}},
		{Processes: map[string][][2]uint64{"g1": ps(10, 600, 12, 600)}},
		{Processes: map[string][][2]uint64{"g1": ps(10, 600, 13, 300, 14, 300)}},
		{Processes: map[string][][2]uint64{"g1": ps(10, 600, 14, 300), "g2": ps(21, 100)}},
	}
	claims := func(dir string) []scenarioClaim {
		out := []scenarioClaim{
			{UID: "b", Pods: []string{"pb"}, GPUs: map[string]uint64{"g1": 2000, "g2": 500}, LimitsFile: filepath.Join(dir, "b.limits")},
			{UID: "a", Pods: []string{"pa"}, GPUs: map[string]uint64{"g1": 1000}, LimitsFile: filepath.Join(dir, "a.limits")},
		}
		for _, c := range out {
			if err := accounting.WriteLimits(c.LimitsFile, accounting.Limits{MemoryLimit: 1 << 30, ComputeShare: 50,
				ComputeWindow: 100 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	gpus := []string{"g1", "g2"}

	pyClaims := claims(t.TempDir())
	in, _ := json.Marshal(map[string]any{"gpus": gpus, "claims": pyClaims, "pods": pods, "samples": samples})
	var py []replayed
	if err := json.Unmarshal(python(t, nil, in, "enforcer.py", "replay"), &py); err != nil {
		t.Fatal(err)
	}

	goClaims := claims(t.TempDir())
	var cur sample
	listed := map[string][]nvml.ProcessInfo{}
	var ec []enforce.Claim
	for _, c := range goClaims {
		e := enforce.Claim{UID: c.UID, Namespace: "gpu-proof", Name: c.UID, PodUIDs: c.Pods, LimitsFile: c.LimitsFile}
		for _, g := range gpus {
			if l, ok := c.GPUs[g]; ok {
				e.GPUs = append(e.GPUs, enforce.GPU{UUID: g, Limit: l})
			}
		}
		ec = append(ec, e)
	}
	en := enforce.New(enforce.Config{
		NVML: &mock.Interface{DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
			return &mock.Device{GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
				if slices.Contains(cur.Unreadable, uuid) {
					return nil, nvml.ERROR_UNKNOWN
				}
				return slices.Clone(listed[uuid]), nvml.SUCCESS
			}}, nvml.SUCCESS
		}},
		GPUs: gpus, Claims: func() []enforce.Claim { return ec },
		PodOf: func(pid uint32) string { return pods[pid] },
		Stop: func(pid uint32, pod string) error {
			if slices.Contains(cur.Gone, pid) || pods[pid] != pod {
				return enforce.ErrGone
			}
			for g := range listed {
				listed[g] = slices.DeleteFunc(listed[g], func(p nvml.ProcessInfo) bool { return p.Pid == pid })
			}
			return nil
		},
	})
	defer en.Close()
	kills := 0
	for i, s := range samples {
		cur = s
		clear(listed)
		for g, l := range s.Processes {
			for _, p := range l {
				listed[g] = append(listed[g], nvml.ProcessInfo{Pid: uint32(p[0]), UsedGpuMemory: p[1]})
			}
		}
		want := replayed{Kills: []replayedKill{}, Observed: map[string][2]uint64{}}
		for _, k := range en.Sample() {
			want.Kills = append(want.Kills, replayedKill{k.Claim.UID, k.GPU, k.Process.PID, k.Process.Used, k.Process.Grew, k.ClaimUsed, k.Limit, k.Err != nil})
		}
		kills += len(want.Kills)
		for _, c := range goClaims {
			l, err := accounting.ReadLimits(c.LimitsFile)
			if err != nil {
				t.Fatal(err)
			}
			want.Observed[c.UID] = [2]uint64{l.ObservedUsed, l.ObservedSeq}
		}
		if i >= len(py) {
			t.Fatalf("the Python enforcer replayed %d samples of %d", len(py), len(samples))
		}
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(py[i])
		if !bytes.Equal(wj, gj) {
			t.Errorf("sample %d: gpu-proof's enforcer %s\n              the node plugin's %s", i+1, gj, wj)
		}
	}
	if kills < 6 {
		t.Errorf("the scenario made %d kills: it no longer exercises the enforcer", kills)
	}
}

// The containers gpu-proof runs its programs in have the environment and
// mounts (paths and options, in order) of the CDI spec the node plugin
// writes for the same claim: a slice or any-size share (the shim through
// /etc/ld.so.preload, the accounting directory read-write, the limits file
// read-only on top), a time-sliced claim (none of it) and a MIG instance,
// on a simulated GPU. The device nodes and driver files, which the proof
// takes from the host as they are, are left out.
func TestContainerMatchesCDISpec(t *testing.T) {
	prerequisites(t, "python3")
	const uuid, migUUID = "GPU-5f0c0dd8-6c5e-4c0e-9b6e-0000000000a1", "MIG-5f0c0dd8-0000-4000-8000-000000000001"
	proc := t.TempDir()
	if err := simulate.WriteProcFiles(proc, 1); err != nil {
		t.Fatal(err)
	}
	host := cdispec.Host{ShimLibrary: "/host/shim/libgpuslice.so.1", PreloadFile: "/host/shim/ld.so.preload",
		Devices: cdispec.Devices{Simulated: true, ProcDir: proc}}
	gpu := cdispec.GPU{UUID: uuid, Model: "NVIDIA A100-SXM4-40GB", ComputeCapability: "8.0", SimulatedState: "/host/state/gpu0"}
	mig := &cdispec.MIG{UUID: migUUID, Profile: "1g.5gb", MemoryBytes: 5100273664, GPUInstance: 1}
	for _, c := range []struct {
		name  string
		slice cdispec.Slice
		args  []string
	}{
		{"a 25 % slice", cdispec.Slice{GPUs: []cdispec.GPU{gpu}, MemoryBytes: 8 << 30, Fraction: 25, AccountingDir: "/host/claims/a"},
			[]string{"limited", "--limit", "8589934592", "--share", "25", "--accounting", "/host/claims/a"}},
		{"an any-size share", cdispec.Slice{GPUs: []cdispec.GPU{gpu}, MemoryBytes: 3<<30 + 512<<20, Fraction: 30, AccountingDir: "/host/claims/b"},
			[]string{"limited", "--limit", "3758096384", "--share", "30", "--accounting", "/host/claims/b"}},
		{"a time-sliced claim", cdispec.Slice{GPUs: []cdispec.GPU{gpu}, Unlimited: true}, []string{"time-sliced"}},
		{"a MIG instance", cdispec.Slice{GPUs: []cdispec.GPU{gpu}, MIG: mig}, []string{"mig", "--mig",
			`{"uuid": "` + migUUID + `", "profile": "1g.5gb", "memory": 5100273664, "simulated": true, "gpuName": "NVIDIA A100-SXM4-40GB", "computeCapability": "8.0"}`}},
	} {
		c.slice.ClaimUID = "claim"
		spec, err := cdispec.Build(c.slice, host)
		if err != nil {
			t.Fatal(err)
		}
		want := spec.Devices[0].ContainerEdits
		args := append([]string{"container.py", "spec"}, c.args...)
		args = append(args, "--uuid", uuid, "--shim", host.ShimLibrary, "--preload", host.PreloadFile)
		if c.slice.MIG == nil {
			args = append(args, "--sim-state", gpu.SimulatedState)
		}
		var got struct {
			Env    []string `json:"env"`
			Mounts []struct {
				HostPath      string   `json:"hostPath"`
				ContainerPath string   `json:"containerPath"`
				Options       []string `json:"options"`
			} `json:"mounts"`
		}
		if err := json.Unmarshal(python(t, nil, nil, args...), &got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Env, want.Env) {
			t.Errorf("%s: gpu-proof's environment %q, the CDI spec's %q", c.name, got.Env, want.Env)
		}
		var wantMounts []string
		for _, m := range want.Mounts {
			wantMounts = append(wantMounts, m.HostPath+" "+m.ContainerPath+" "+strings.Join(m.Options, ","))
		}
		var gotMounts []string
		for _, m := range got.Mounts {
			gotMounts = append(gotMounts, m.HostPath+" "+m.ContainerPath+" "+strings.Join(m.Options, ","))
		}
		if !slices.Equal(gotMounts, wantMounts) {
			t.Errorf("%s: gpu-proof's mounts\n%s\nthe CDI spec's\n%s", c.name, strings.Join(gotMounts, "\n"), strings.Join(wantMounts, "\n"))
		}
	}
}
