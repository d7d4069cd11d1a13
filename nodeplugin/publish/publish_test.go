package publish_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

func discover(t *testing.T, lib nvml.Interface) discovery.Result {
	t.Helper()
	res, err := discovery.Discover(lib)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSliceModel checks, for nodes of 1, 4 and 8 simulated V100s, that every
// GPU gets its own counter set of 32 GiB and 100 % compute, and that the
// devices of each fraction consume exactly those counters.
func TestSliceModel(t *testing.T) {
	for _, n := range []int{1, 4, 8} {
		t.Run(fmt.Sprintf("%d GPUs", n), func(t *testing.T) {
			res := discover(t, simulate.New(simulate.Spec{Profile: "v100-32gb", Count: n}, "node-a"))
			if len(res.GPUs) != n || len(res.Skipped) != 0 {
				t.Fatalf("discovered %d GPUs, skipped %v; want %d and none", len(res.GPUs), res.Skipped, n)
			}
			dr := publish.Build("node-a", res.GPUs, publish.Options{Fractions: contract.DefaultFractions})
			pool, ok := dr.Pools["node-a"]
			if !ok || len(dr.Pools) != 1 {
				t.Fatalf("pools %v: want one named after the node", dr.Pools)
			}
			if len(pool.Slices) != 2*n {
				t.Fatalf("%d slices, want %d (a counter slice and a device slice per GPU)", len(pool.Slices), 2*n)
			}
			for i := 0; i < n; i++ {
				counters, devices := pool.Slices[2*i], pool.Slices[2*i+1]
				if len(counters.Devices) != 0 || len(counters.SharedCounters) != 1 {
					t.Fatalf("GPU %d counter slice: %d devices, %d counter sets; want 0 and 1", i, len(counters.Devices), len(counters.SharedCounters))
				}
				cs := counters.SharedCounters[0]
				mem, comp := cs.Counters[contract.CapacityMemory].Value, cs.Counters[contract.CapacityCompute].Value
				if cs.Name != fmt.Sprintf("gpu-%d", i) || mem.Value() != 32<<30 || comp.Value() != 100 {
					t.Fatalf("GPU %d counter set %s: memory %s compute %s; want gpu-%d, 32Gi, 100", i, cs.Name, mem.String(), comp.String(), i)
				}
				if len(devices.Devices) != 4+2+1 {
					t.Fatalf("GPU %d: %d devices, want 7 (4×25 %%, 2×50 %%, 1×100 %%)", i, len(devices.Devices))
				}
				perFraction := map[int64][2]int64{}
				for _, d := range devices.Devices {
					f := *d.Attributes[contract.AttrFraction].IntValue
					if len(d.ConsumesCounters) != 1 || d.ConsumesCounters[0].CounterSet != cs.Name {
						t.Fatalf("device %s consumes %v, want counter set %s", d.Name, d.ConsumesCounters, cs.Name)
					}
					c := d.ConsumesCounters[0].Counters
					m, p := c[contract.CapacityMemory].Value, c[contract.CapacityCompute].Value
					sum := perFraction[f]
					perFraction[f] = [2]int64{sum[0] + m.Value(), sum[1] + p.Value()}
					if capM := d.Capacity[contract.CapacityMemory].Value; capM.Cmp(m) != 0 {
						t.Errorf("device %s capacity memory %s differs from what it consumes, %s", d.Name, capM.String(), m.String())
					}
				}
				for f, sum := range perFraction {
					if sum[0] != mem.Value() || sum[1] != 100 {
						t.Errorf("GPU %d: the %d%% devices consume %d bytes and %d%% compute together, want the whole GPU", i, f, sum[0], sum[1])
					}
				}
			}
		})
	}
}

// TestDeviceAttributes checks the names and attributes the engine's device
// classes select on.
func TestDeviceAttributes(t *testing.T) {
	res := discover(t, simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, "node-a"))
	dr := publish.Build("node-a", res.GPUs, publish.Options{Fractions: []int{25}})
	d := dr.Pools["node-a"].Slices[3].Devices[2]
	if d.Name != "gpu-1-25pct-3" {
		t.Errorf("device name %q, want gpu-1-25pct-3", d.Name)
	}
	want := map[string]string{
		contract.AttrModel: "Tesla V100-PCIE-32GB", contract.AttrArchitecture: "Volta", contract.AttrDriverVersion: simulate.DriverVersion,
		contract.AttrUUID: res.GPUs[1].UUID, contract.AttrPCIBusID: "00000000:5e:00.0",
	}
	for k, v := range want {
		if got := d.Attributes[resourcev1.QualifiedName(k)].StringValue; got == nil || *got != v {
			t.Errorf("attribute %s = %v, want %q", k, got, v)
		}
	}
	if got := *d.Attributes[contract.AttrComputeCapability].VersionValue; got != "7.0.0" {
		t.Errorf("computeCapability %q, want 7.0.0", got)
	}
	if got := *d.Attributes[contract.AttrCUDADriverVersion].VersionValue; got != "12.4.0" {
		t.Errorf("cudaDriverVersion %q, want 12.4.0", got)
	}
	if got := *d.Attributes[contract.AttrIndex].IntValue; got != 1 {
		t.Errorf("index %d, want 1", got)
	}
	m := d.Capacity[contract.CapacityMemory].Value
	if m.String() != "8Gi" {
		t.Errorf("memory capacity %s, want 8Gi", m.String())
	}
}

// TestSimulatedNodesDiffer checks UUIDs are stable per node and differ
// between nodes, and that the SXM2 profile reports its own name.
func TestSimulatedNodesDiffer(t *testing.T) {
	a1 := discover(t, simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, "node-a"))
	a2 := discover(t, simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, "node-a"))
	b := discover(t, simulate.New(simulate.Spec{Profile: "v100-sxm2-32gb", Count: 2}, "node-b"))
	if a1.GPUs[0].UUID != a2.GPUs[0].UUID {
		t.Errorf("UUID changed between two simulations of one node: %s, %s", a1.GPUs[0].UUID, a2.GPUs[0].UUID)
	}
	if a1.GPUs[0].UUID == b.GPUs[0].UUID || a1.GPUs[0].UUID == a1.GPUs[1].UUID {
		t.Errorf("UUIDs not unique: %s %s %s", a1.GPUs[0].UUID, a1.GPUs[1].UUID, b.GPUs[0].UUID)
	}
	if b.GPUs[0].Name != "Tesla V100-SXM2-32GB" || b.GPUs[1].Minor != 1 {
		t.Errorf("SXM2 GPU: %+v", b.GPUs[1])
	}
}

// TestBrokenGPUsAreSkipped: a GPU NVML cannot read, and one in MIG mode
// whose instances NVML does not list, are skipped with a reason; the others
// are still offered.
func TestBrokenGPUsAreSkipped(t *testing.T) {
	srv := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 3}, "node-a")
	srv.Devices[0].(*server.Device).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	srv.Devices[2].(*server.Device).GetMigModeFunc = func() (int, int, nvml.Return) { return 1, 1, nvml.SUCCESS }
	srv.Devices[2].(*server.Device).GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NO_PERMISSION }
	res := discover(t, srv)
	if len(res.GPUs) != 1 || res.GPUs[0].Index != 1 {
		t.Fatalf("offered %+v, want only GPU 1", res.GPUs)
	}
	if len(res.Skipped) != 2 || res.Skipped[0].Index != 0 || res.Skipped[1].Index != 2 {
		t.Fatalf("skipped %+v, want GPUs 0 and 2", res.Skipped)
	}
	if !strings.Contains(res.Skipped[1].Reason, "MIG mode is enabled, but its instances cannot be read") {
		t.Errorf("GPU 2 skipped for %q, want the unreadable MIG instances named", res.Skipped[1].Reason)
	}
}

func TestParse(t *testing.T) {
	if f, err := publish.ParseFractions("50, 25,100"); err != nil || fmt.Sprint(f) != "[25 50 100]" {
		t.Errorf("ParseFractions: %v %v", f, err)
	}
	for _, bad := range []string{"30", "0", "25,25", "x"} {
		if _, err := publish.ParseFractions(bad); err == nil {
			t.Errorf("ParseFractions(%q) accepted", bad)
		}
	}
	if s, err := simulate.ParseSpec("v100-32gb:4"); err != nil || s.Count != 4 {
		t.Errorf("ParseSpec: %+v %v", s, err)
	}
	for _, bad := range []string{"a100:1", "v100-32gb:0", "v100-32gb:x"} {
		if _, err := simulate.ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) accepted", bad)
		}
	}
}
