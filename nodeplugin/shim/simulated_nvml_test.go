package shim_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuslice/gpuslice/internal/testenv"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// The node plugin's simulated NVML lists the processes the fake driver
// records in a simulated GPU's state file as real NVML does, with host
// PIDs, also for a process in a PID namespace of its own (a container),
// and frees the memory of a process that is gone, as a driver does.
func TestSimulatedNVMLListsAndReapsProcesses(t *testing.T) {
	flags := pidNamespaceFlags(t)
	srv := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 1}, "node")
	dir := t.TempDir()
	if err := simulate.AttachProcesses(srv, dir, "/proc"); err != nil {
		t.Fatal(err)
	}
	dev, _ := srv.DeviceGetHandleByIndex(0)
	uuid, _ := dev.GetUUID()
	state := simulate.StateFile(dir, uuid)
	if st, err := os.Stat(state); err != nil || st.Mode().Perm() != 0o666 {
		t.Fatalf("state file %v, %v: want one every container user can open", st, err)
	}
	list := func() map[uint32]uint64 {
		t.Helper()
		procs, ret := dev.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			t.Fatalf("GetComputeRunningProcesses: %v", ret)
		}
		out := map[uint32]uint64{}
		for _, p := range procs {
			out[p.Pid] = p.UsedGpuMemory
		}
		return out
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("an unused GPU lists %v", got)
	}

	e := shimtest.NewEnv(t, 0) // the simulated silicon only: no library
	e.FakeState = state
	host := start(t, e.Command(false, "gs_probe", "interactive"))
	cmd := e.Command(false, "gs_probe", "interactive")
	w := exec.Command("unshare", append(flags, cmd.Args[0], "interactive")...)
	w.Env = cmd.Env
	contained := start(t, w)
	if contained.pid != 1 {
		t.Fatalf("the contained process is pid %d in its namespace, want 1", contained.pid)
	}
	containedHost := childOf(t, w.Process.Pid)
	for p, n := range map[*proc]uint64{host: 2 * GiB, contained: 3 * GiB} {
		if r := p.alloc(n); r != "ok" {
			t.Fatalf("alloc: %s", r)
		}
	}
	got := list()
	want := map[uint32]uint64{uint32(host.cmd.Process.Pid): 2*GiB + shimtest.ContextBytes, uint32(containedHost): 3*GiB + shimtest.ContextBytes}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("processes %v, want host PIDs and memory %v", got, want)
	}
	if used := memUsed(t, state); used != 5*GiB+2*shimtest.ContextBytes {
		t.Errorf("GPU memory in use %d", used)
	}

	syscall.Kill(containedHost, syscall.SIGKILL)
	w.Wait()
	got = list()
	if _, ok := got[uint32(containedHost)]; ok || len(got) != 1 {
		t.Errorf("after kill -9 of the contained process: %v", got)
	}
	if used := memUsed(t, state); used != 2*GiB+shimtest.ContextBytes {
		t.Errorf("GPU memory in use after the kill: %d, want the dead process's freed", used)
	}
}

func memUsed(t *testing.T, state string) uint64 {
	t.Helper()
	b, err := os.ReadFile(state)
	if err != nil || len(b) < 16 {
		t.Fatalf("state %s: %v", state, err)
	}
	return binary.LittleEndian.Uint64(b[8:])
}

// pidNamespaceFlags are unshare's flags for a process in a PID namespace of
// its own, on this machine.
func pidNamespaceFlags(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		testenv.Unavailable(t, "unshare not found (util-linux): cannot run processes in their own PID namespaces")
	}
	for _, f := range [][]string{{"--pid", "--fork", "--kill-child", "--mount-proc"}, {"--pid", "--fork", "--kill-child", "--mount-proc", "--map-root-user"}} {
		if exec.Command("unshare", append(f, "true")...).Run() == nil {
			return f
		}
	}
	out, _ := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").CombinedOutput()
	testenv.Unavailable(t, "this machine does not allow PID namespaces (%s)", strings.TrimSpace(string(out)))
	return nil
}

// childOf is the one child of pid (unshare's: the contained process).
func childOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	child, convErr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || convErr != nil {
		t.Fatalf("no child of %d: %q %v", pid, b, err)
	}
	return child
}
