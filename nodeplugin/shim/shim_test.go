package shim_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/shim"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

const (
	GiB   = shimtest.GiB
	MiB   = shimtest.MiB
	slice = 8 * GiB // a 25 % package of a V100-32GB
)

func TestMain(m *testing.M) {
	code := m.Run()
	shimtest.Cleanup()
	os.Exit(code)
}

// The Go names the node plugin uses are the ones the library reads.
func TestConstantsMatchHeader(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(shimtest.SourceDir(), "include", "gpuslice.h"))
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define (GPUSLICE_\w+) (.+)$`).FindAllStringSubmatch(string(src), -1) {
		defs[m[1]] = strings.Trim(strings.TrimSpace(m[2]), `"`)
	}
	for name, want := range map[string]string{
		"GPUSLICE_ENV_MEMORY_LIMIT":          contract.EnvMemoryLimit,
		"GPUSLICE_ENV_COMPUTE_SHARE":         contract.EnvComputeShare,
		"GPUSLICE_ENV_ACCOUNTING_DIR":        contract.EnvAccountingDir,
		"GPUSLICE_ENV_COMPUTE_BURST":         contract.EnvComputeBurst,
		"GPUSLICE_ENV_COMPUTE_WINDOW_MS":     contract.EnvComputeWindowMS,
		"GPUSLICE_ENV_CONTEXT_OVERHEAD":      contract.EnvContextOverhead,
		"GPUSLICE_ENV_DEBUG":                 contract.EnvDebug,
		"GPUSLICE_CONTAINER_LIBRARY":         contract.ContainerLibraryPath,
		"GPUSLICE_CONTAINER_PRELOAD":         contract.ContainerPreloadPath,
		"GPUSLICE_CONTAINER_ACCOUNTING_DIR":  contract.ContainerAccountingDir,
		"GPUSLICE_REGION_FILE":               contract.RegionFile,
		"GPUSLICE_DEFAULT_CONTEXT_OVERHEAD":  strconv.Itoa(shim.DefaultContextOverhead) + "ULL",
		"GPUSLICE_DEFAULT_COMPUTE_WINDOW_MS": strconv.Itoa(shim.DefaultComputeWindowMS) + "u",
	} {
		if defs[name] != want {
			t.Errorf("%s: gpuslice.h has %q, package shim %q", name, defs[name], want)
		}
	}
}

func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// field returns the number after key= on the line starting with prefix.
func field(t *testing.T, out, prefix, key string) uint64 {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, prefix+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, key+"="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("%s %s: %v", prefix, key, err)
				}
				return n
			}
		}
	}
	t.Fatalf("no %s %s= in:\n%s", prefix, key, out)
	return 0
}

// An 8 GiB slice looks like an 8 GiB GPU to CUDA and NVML; without the
// library the simulated device shows its 32 GiB.
func TestReportsTheSlice(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	out := run(t, e.Command(true, "gs_probe", "info"))
	for _, c := range []struct{ prefix, key string }{
		{"cuMemGetInfo_v2", "total"}, {"cuDeviceTotalMem_v2", "total"},
		{"nvmlDeviceGetMemoryInfo", "total"}, {"nvmlDeviceGetMemoryInfo_v2", "total"},
	} {
		if got := field(t, out, c.prefix, c.key); got != slice {
			t.Errorf("%s %s = %d, want %d", c.prefix, c.key, got, uint64(slice))
		}
	}
	if got := field(t, out, "cuMemGetInfo_v2", "free"); got != slice-shimtest.ContextBytes {
		t.Errorf("free = %d, want the slice less the context (%d)", got, slice-shimtest.ContextBytes)
	}
	if got := field(t, out, "nvmlDeviceGetMemoryInfo_v2", "used"); got != shimtest.ContextBytes {
		t.Errorf("NVML used = %d, want the claim's use %d", got, shimtest.ContextBytes)
	}

	smi := run(t, e.Command(true, "gpuslice-smi"))
	t.Logf("gpuslice-smi in the container:\n%s", smi)
	if !strings.Contains(smi, "/   8192MiB") {
		t.Errorf("gpuslice-smi does not show 8192MiB:\n%s", smi)
	}
	if bare := run(t, e.Command(false, "gpuslice-smi")); !strings.Contains(bare, "/  32768MiB") {
		t.Errorf("without the library the simulated GPU should show 32768MiB:\n%s", bare)
	}
}

// Every allocation path, reached every way a program finds the driver.
func TestAllocationPaths(t *testing.T) {
	for _, mode := range []string{"link", "dlsym", "proc", "proc11", "ptsz", "fork"} {
		t.Run(mode, func(t *testing.T) {
			e := shimtest.NewEnv(t, slice)
			prog := "gs_probe"
			if mode == "link" {
				prog = "gs_linked"
			}
			out, err := e.Command(true, prog, "paths", mode).CombinedOutput()
			passes := strings.Count(string(out), "PASS ")
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "FAIL ") || strings.HasPrefix(line, "gs_probe:") {
					t.Error(line)
				}
			}
			if err != nil || passes < 30 {
				t.Errorf("%s paths %s: %v, %d checks passed\n%s", prog, mode, err, passes, out)
			}
		})
	}
	// the same checks without the library must fail: they test the library
	t.Run("without-library", func(t *testing.T) {
		e := shimtest.NewEnv(t, slice)
		out, err := e.Command(false, "gs_probe", "paths", "dlsym").CombinedOutput()
		if err == nil || strings.Count(string(out), "FAIL ") < 10 {
			t.Errorf("without the library the checks passed:\n%s", out)
		}
	})
}

// cuGetProcAddress may hand out an address that is no exported symbol (an
// internal entry point, or a variant newer than the library). For a CUDA
// version whose variants the library knows, it still wraps it; past that, an
// allocator is refused rather than let through unaccounted.
func TestGetProcAddressUnexportedVariant(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	for _, c := range []struct {
		preload, unexported bool
		version             string
		want                string
	}{
		{true, false, "13050", "getproc rc=0 status=0 found=1\nalloc-whole-slice rc=2"},
		{true, true, "12080", "getproc rc=0 status=0 found=1\nalloc-whole-slice rc=2"},
		{true, true, "13050", "getproc rc=500 status=1 found=0"},
		{false, true, "13050", "getproc rc=0 status=0 found=1\nalloc-whole-slice rc=0"},
	} {
		cmd := e.Command(c.preload, "gs_probe", "getproc", "cuMemAlloc", c.version)
		if c.unexported {
			cmd.Env = append(cmd.Env, "FAKEGPU_PROC_UNEXPORTED=1")
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %s", err, stderr.String())
		}
		if got := strings.TrimSpace(stdout.String()); got != c.want {
			t.Errorf("library %v, unexported %v, CUDA %s: got %q, want %q (%s)", c.preload, c.unexported, c.version, got, c.want, stderr.String())
		}
	}
}

// The library wraps dlsym; a library that chains to the next definition with
// dlsym(RTLD_NEXT, ...) must still get the one after itself.
func TestDlsymNextKeepsItsMeaning(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	for _, preload := range []bool{false, true} {
		if out := strings.TrimSpace(run(t, e.Command(preload, "gs_next"))); out != "11" {
			t.Errorf("interposer chain (library preloaded: %v) printed %s, want 11", preload, out)
		}
	}
}

// A forked worker is limited by the same budget, and its share comes back
// when it dies without freeing.
func TestForkedWorker(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	out := run(t, e.Command(true, "gs_probe", "forkcheck"))
	if strings.Count(out, "PASS ") != 5 {
		t.Errorf("forkcheck:\n%s", out)
	}
}

// The library is loaded by /etc/ld.so.preload, with the environment (as the
// CDI spec sets it) and without it (an ssh or su session that dropped it; the
// limits then come from the region at the fixed accounting directory).
func TestPreloadFile(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not found: cannot try /etc/ld.so.preload without changing this machine's /etc")
	}
	etc := t.TempDir()
	if err := os.WriteFile(filepath.Join(etc, "ld.so.preload"), []byte(e.Library()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cache, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		os.WriteFile(filepath.Join(etc, "ld.so.cache"), cache, 0o644)
	}
	probe := filepath.Join(e.Bin, "gs_probe")
	script := fmt.Sprintf(`set -e
mount --bind %[1]q /etc
mount -t tmpfs none /run
mkdir /run/gpuslice
mount --bind %[2]q /run/gpuslice
ls / >/dev/null
test ! -e %[2]q/%[3]s || { echo "a process without CUDA touched the region"; exit 1; }
echo "== with the environment"
%[4]q info
%[5]q
echo "== without it"
env -u GPUSLICE_MEMORY_LIMIT -u GPUSLICE_ACCOUNTING_DIR -u GPUSLICE_CONTEXT_OVERHEAD %[4]q info
`, etc, e.AccountingDir, contract.RegionFile, probe, filepath.Join(e.Bin, "gpuslice-smi"))
	var out []byte
	var err error
	for _, args := range [][]string{{"--mount"}, {"--mount", "--map-root-user"}} {
		cmd := exec.Command("unshare", append(args, "sh", "-c", script)...)
		cmd.Env = e.Environ(false)
		out, err = cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "unshare:") {
			break
		}
	}
	if err != nil && strings.Contains(string(out), "unshare:") {
		t.Skipf("this machine does not allow a private mount namespace (%s); /etc/ld.so.preload is untested here", strings.TrimSpace(string(out)))
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
	with, without, _ := strings.Cut(string(out), "== without it")
	if got := field(t, with, "cuMemGetInfo_v2", "total"); got != slice {
		t.Errorf("with /etc/ld.so.preload: total %d, want %d", got, uint64(slice))
	}
	if !strings.Contains(with, "/   8192MiB") {
		t.Errorf("gpuslice-smi under /etc/ld.so.preload:\n%s", with)
	}
	if got := field(t, without, "cuMemGetInfo_v2", "total"); got != slice {
		t.Errorf("without the environment: total %d, want the region's %d", got, uint64(slice))
	}
}

// proc is an interactive gs_probe: one process of a claim.
type proc struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.Writer
	out *bufio.Scanner
	pid int // in its own PID namespace
}

func start(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &proc{t: t, cmd: cmd, in: in, out: bufio.NewScanner(outp)}
	line := p.read()
	if _, err := fmt.Sscanf(line, "ready %d", &p.pid); err != nil {
		t.Fatalf("%s: %q %s", cmd.Args, line, stderr.String())
	}
	return p
}

func (p *proc) read() string {
	p.t.Helper()
	if !p.out.Scan() {
		p.t.Fatalf("%v ended: %v", p.cmd.Args, p.out.Err())
	}
	return p.out.Text()
}

func (p *proc) say(s string) string {
	p.t.Helper()
	io.WriteString(p.in, s+"\n")
	return p.read()
}

func (p *proc) alloc(n uint64) string {
	p.t.Helper()
	r := p.say("alloc " + strconv.FormatUint(n, 10))
	if strings.HasPrefix(r, "ok ") {
		return "ok"
	}
	return r
}

func regionOf(t *testing.T, e *shimtest.Env) *accounting.Region {
	t.Helper()
	r, err := accounting.ReadFile(e.Region())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sharedBudget: two processes of one claim share its budget, and kill -9 of
// one gives its share to the other. wrap turns a command into one running in
// its own container-like namespace (or leaves it).
func sharedBudget(t *testing.T, wrap func(*exec.Cmd) *exec.Cmd, kill func(*proc)) {
	e := shimtest.NewEnv(t, slice)
	a := start(t, wrap(e.Command(true, "gs_probe", "interactive")))
	b := start(t, wrap(e.Command(true, "gs_probe", "interactive")))
	if r := a.alloc(5 * GiB); r != "ok" {
		t.Fatalf("A alloc 5 GiB: %s", r)
	}
	// 8 GiB - 2 contexts - 5 GiB = 2.4 GiB left
	if r := b.alloc(5 * GiB); r != "err 2" {
		t.Errorf("B alloc 5 GiB beyond the shared budget: %s, want err 2 (CUDA_ERROR_OUT_OF_MEMORY)", r)
	}
	if r := b.alloc(2 * GiB); r != "ok" {
		t.Errorf("B alloc 2 GiB: %s", r)
	}
	kill(a)
	if r := b.alloc(5 * GiB); r != "ok" {
		t.Errorf("B alloc 5 GiB after A was killed: %s", r)
	}
	want := uint64(7*GiB + shimtest.ContextBytes)
	if r := b.say("used"); !strings.HasPrefix(r, "used "+strconv.FormatUint(want, 10)+" ") {
		t.Errorf("B sees %q, want used %d", r, want)
	}
	reg := regionOf(t, e)
	if reg.Used != want || reg.ReclaimedProcesses != 1 || reg.ReclaimedBytes != 5*GiB+shimtest.ContextBytes {
		t.Errorf("region: used %d, reclaimed %d bytes of %d processes", reg.Used, reg.ReclaimedBytes, reg.ReclaimedProcesses)
	}
	if len(reg.Processes) != 1 || !reg.Processes[0].Alive || reg.Processes[0].PID != uint32(b.pid) {
		t.Errorf("processes: %+v, want only B (pid %d)", reg.Processes, b.pid)
	}
}

func TestSharedBudgetAndKill(t *testing.T) {
	sharedBudget(t, func(c *exec.Cmd) *exec.Cmd { return c }, func(p *proc) {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	})
}

// Two "containers": each process in its own PID namespace (both are PID 1
// there), sharing one claim.
func TestSharedBudgetAcrossPIDNamespaces(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not found")
	}
	var flags []string
	for _, f := range [][]string{{"--pid", "--fork", "--kill-child"}, {"--pid", "--fork", "--kill-child", "--map-root-user"}} {
		if exec.Command("unshare", append(f, "true")...).Run() == nil {
			flags = f
			break
		}
	}
	if flags == nil {
		out, _ := exec.Command("unshare", "--pid", "--fork", "true").CombinedOutput()
		t.Skipf("this machine does not allow PID namespaces (%s)", strings.TrimSpace(string(out)))
	}
	wrap := func(c *exec.Cmd) *exec.Cmd {
		w := exec.Command("unshare", append(flags, c.Args[0], "interactive")...)
		w.Env = c.Env
		return w
	}
	sharedBudget(t, wrap, func(p *proc) {
		if p.pid != 1 {
			t.Errorf("the process is pid %d in its namespace, want 1", p.pid)
		}
		// kill -9 the process itself (not unshare), as a container runtime would
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.cmd.Process.Pid, p.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		child, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("children of unshare: %q", b)
		}
		syscall.Kill(child, syscall.SIGKILL)
		p.cmd.Wait()
	})
}

// 4 processes × 16 threads allocate and free at random through five paths:
// the claim never holds more than its budget, neither in the library's books
// nor on the device, and ends at exactly zero.
func TestConcurrentStress(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	const procs, threads, ops = 4, 16, 10000
	var (
		cmds []*exec.Cmd
		outs []*bytes.Buffer
		ins  []io.WriteCloser
		read []chan struct{}
	)
	for i := 0; i < procs; i++ {
		cmd := e.Command(true, "gs_probe", "stress", strconv.Itoa(threads), strconv.Itoa(ops), strconv.Itoa(i+1))
		in, _ := cmd.StdinPipe()
		outp, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(outp)
		if !sc.Scan() || sc.Text() != "ready" {
			t.Fatalf("stress %d did not start: %q %s", i, sc.Text(), stderr.String())
		}
		// Wait closes the pipe, so the output is read to its end first.
		buf, eof := &bytes.Buffer{}, make(chan struct{})
		go func() {
			defer close(eof)
			for sc.Scan() {
				buf.WriteString(sc.Text() + "\n")
			}
		}()
		cmds, outs, ins, read = append(cmds, cmd), append(outs, buf), append(ins, in), append(read, eof)
	}
	// watch the region while they run
	done := make(chan struct{})
	var worst uint64
	var samples int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if r, err := accounting.ReadFile(e.Region()); err == nil {
				samples++
				worst = max(worst, r.Used)
			}
		}
	}()
	begin := time.Now()
	for _, in := range ins {
		io.WriteString(in, "go\n")
	}
	for i, cmd := range cmds {
		<-read[i]
		if err := cmd.Wait(); err != nil {
			t.Errorf("stress %d: %v\n%s", i, err, outs[i])
		}
	}
	elapsed := time.Since(begin)
	close(done)
	wg.Wait()
	var ok, oom uint64
	for _, o := range outs {
		s := o.String()
		ok += field(t, s, "stress", "ok")
		oom += field(t, s, "stress", "oom")
		if field(t, s, "stress", "err") != 0 || field(t, s, "stress", "over") != 0 {
			t.Errorf("stress: %s", s)
		}
	}
	r := regionOf(t, e)
	fake := run(t, e.Command(false, "gs_probe", "fakestat"))
	devUsed, devHigh := field(t, fake, "fake", "used"), field(t, fake, "fake", "high")
	t.Logf("%d processes × %d threads × %d ops in %v: %d allocations, %d refused; region high water %d (limit %d), "+
		"watched %d times (worst %d); device high water %d", procs, threads, ops, elapsed, ok, oom, r.HighWater,
		uint64(slice), samples, worst, devHigh)
	if r.Used != 0 {
		t.Errorf("region used %d after every allocation was freed, want 0", r.Used)
	}
	if r.HighWater > slice || worst > slice || devHigh > slice {
		t.Errorf("over the limit: region high water %d, watched %d, device %d, limit %d", r.HighWater, worst, devHigh, uint64(slice))
	}
	if devUsed != 0 {
		t.Errorf("device still holds %d bytes", devUsed)
	}
	if ok == 0 || oom == 0 || r.OOMCount != oom {
		t.Errorf("%d allocations succeeded and %d were refused (region counted %d): the test must reach the limit", ok, oom, r.OOMCount)
	}
}

// Configuration errors refuse the GPU with a message; no configuration at all
// leaves the process alone.
func TestConfiguration(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	e.Vars = []string{"GPUSLICE_MEMORY_LIMIT=eight"}
	out, err := e.Command(true, "gs_probe", "info").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `GPUSLICE_MEMORY_LIMIT="eight" is not a byte count`) ||
		!strings.Contains(string(out), "cuInit: 3") {
		t.Errorf("a bad limit: %v\n%s", err, out)
	}

	e = shimtest.NewEnv(t, slice)
	e.Vars = []string{"GPUSLICE_MEMORY_LIMIT=8Gi", "GPUSLICE_COMPUTE_SHARE=250"}
	out, _ = e.Command(true, "gs_probe", "info").CombinedOutput()
	if !strings.Contains(string(out), "is not a percentage from 1 to 100") {
		t.Errorf("a bad share:\n%s", out)
	}

	e = shimtest.NewEnv(t, slice)
	e.Vars = nil // the accounting directory is set, the limit is not, no region exists
	out, err = e.Command(true, "gs_probe", "info").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "GPUSLICE_MEMORY_LIMIT is not set") {
		t.Errorf("no limit and no region: %v\n%s", err, out)
	}

	e = shimtest.NewEnv(t, slice)
	e.Vars = []string{"GPUSLICE_MEMORY_LIMIT=8Gi"} // suffixes work too
	if got := field(t, run(t, e.Command(true, "gs_probe", "info")), "cuMemGetInfo_v2", "total"); got != slice {
		t.Errorf("8Gi: total %d", got)
	}

	if _, err := os.Stat(filepath.Join(contract.ContainerAccountingDir, contract.RegionFile)); err == nil {
		t.Skipf("%s exists on this machine; cannot test an unconfigured process", contract.ContainerAccountingDir)
	}
	cmd := e.Command(true, "gs_probe", "info")
	var env []string
	for _, kv := range cmd.Env {
		if !strings.HasPrefix(kv, "GPUSLICE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	if got := field(t, run(t, cmd), "cuMemGetInfo_v2", "total"); got != 32*GiB {
		t.Errorf("no configuration at all: total %d, want the device's 32 GiB", got)
	}
}

// A region of another layout version: replaced when nobody uses it, left
// untouched (and the GPU refused) while a process of that version is alive;
// a region of this version with larger header and slots (a newer minor
// layout) is used without damaging the fields it does not know.
func TestRegionVersions(t *testing.T) {
	old := func() []byte {
		b := accounting.Encode(4*GiB, 100, false, time.Second, time.Now())
		b[8] = 0 // layout version 0
		for i := 300; i < 400; i++ {
			b[i] = 0xAB
		}
		return b
	}

	t.Run("old-and-unused", func(t *testing.T) {
		e := shimtest.NewEnv(t, slice)
		os.WriteFile(e.Region(), old(), 0o666)
		out := run(t, e.Command(true, "gs_probe", "info"))
		if !strings.Contains(out, "region layout version 0") || field(t, out, "cuMemGetInfo_v2", "total") != slice {
			t.Errorf("old region not replaced:\n%s", out)
		}
		if r := regionOf(t, e); r.Version != accounting.Version || r.MemoryLimit != slice {
			t.Errorf("region now %+v", r)
		}
	})

	t.Run("old-and-in-use", func(t *testing.T) {
		e := shimtest.NewEnv(t, slice)
		before := old()
		os.WriteFile(e.Region(), before, 0o666)
		f, err := os.Open(e.Region())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := accounting.HoldPresence(f); err != nil { // a live process of that version
			t.Fatal(err)
		}
		out, err := e.Command(true, "gs_probe", "info").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "in use and unusable: region layout version 0") {
			t.Errorf("GPU not refused next to a live process of another version: %v\n%s", err, out)
		}
		after, _ := os.ReadFile(e.Region())
		if !bytes.Equal(before, after) {
			t.Error("the region of a live process of another version was modified")
		}
	})

	t.Run("newer-minor-layout", func(t *testing.T) {
		e := shimtest.NewEnv(t, slice)
		const hdr, slot, n = 384, 192, 64
		b := make([]byte, hdr+slot*n)
		copy(b, accounting.Encode(slice, 100, false, time.Second, time.Now())[:accounting.HeaderSize])
		le := func(off int, v uint32) {
			b[off], b[off+1], b[off+2], b[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		}
		le(12, hdr)
		le(16, slot)
		le(20, n)
		sentinel := func() {
			for i := accounting.HeaderSize; i < hdr; i++ {
				b[i] = 0x5A
			}
			for s := 0; s < n; s++ {
				for i := accounting.SlotSize; i < slot; i++ {
					b[hdr+s*slot+i] = 0x5A
				}
			}
		}
		sentinel()
		os.WriteFile(e.Region(), b, 0o666)
		p := start(t, e.Command(true, "gs_probe", "interactive"))
		if r := p.alloc(1 * GiB); r != "ok" {
			t.Fatalf("alloc: %s", r)
		}
		r := regionOf(t, e)
		if r.Used != GiB+shimtest.ContextBytes || len(r.Processes) != 1 || r.Processes[0].Used != r.Used {
			t.Errorf("newer layout read back as used %d, processes %+v", r.Used, r.Processes)
		}
		got, _ := os.ReadFile(e.Region())
		for i := accounting.HeaderSize; i < hdr; i++ {
			if got[i] != 0x5A {
				t.Fatalf("header byte %d it does not know was overwritten", i)
			}
		}
		for s := 0; s < n; s++ {
			for i := accounting.SlotSize; i < slot; i++ {
				if got[hdr+s*slot+i] != 0x5A {
					t.Fatalf("slot %d byte %d it does not know was overwritten", s, i)
				}
			}
		}
	})
}

// tenant is one claim running kernels flat out on the shared simulated GPU.
type tenant struct {
	kind  string // how it launches: kernel, ex, coop, graph, ptsz
	us    int    // kernel duration
	share int    // 0: no library
	burst bool
}

// runTenants runs the tenants together; each measures its own GPU time over
// [w0, w1] after a common start and returns it as a fraction of that window.
func runTenants(t *testing.T, ts []tenant, w0, w1 time.Duration) ([]float64, error) {
	gpu := shimtest.NewEnv(t, slice).FakeState
	epoch := time.Now().Add(400 * time.Millisecond).UnixNano()
	cmds := make([]*exec.Cmd, len(ts))
	outs := make([]*bytes.Buffer, len(ts))
	for i, tn := range ts {
		e := shimtest.NewEnv(t, slice) // each tenant is its own claim
		e.FakeState = gpu
		e.Vars = append(e.Vars, "GPUSLICE_COMPUTE_SHARE="+strconv.Itoa(max(tn.share, 1)))
		if tn.burst {
			e.Vars = append(e.Vars, "GPUSLICE_COMPUTE_BURST=1")
		}
		cmds[i] = e.Command(tn.share > 0, "gs_probe", "tenant", tn.kind, strconv.Itoa(tn.us), strconv.FormatInt(epoch, 10),
			strconv.FormatInt(w0.Milliseconds(), 10), strconv.FormatInt(w1.Milliseconds(), 10),
			strconv.FormatInt((w1+200*time.Millisecond).Milliseconds(), 10))
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			return nil, err
		}
	}
	shares := make([]float64, len(ts))
	var errs []error
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("tenant %d: %v\n%s", i, err, outs[i]))
		} else if _, err := fmt.Sscanf(outs[i].String(), "share %g", &shares[i]); err != nil {
			errs = append(errs, fmt.Errorf("tenant %d: %q", i, outs[i]))
		}
	}
	return shares, errors.Join(errs...)
}

// Four tenants at 25 %, each launching flat out, with different kernel sizes
// and launch APIs: each gets 25 % ± 5 percentage points over a 10 s window.
func TestComputeShareFourTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 12 s")
	}
	ts := []tenant{{"kernel", 500, 25, false}, {"ex", 1000, 25, false}, {"coop", 2000, 25, false}, {"graph", 4000, 25, false}}
	shares, err := runTenants(t, ts, time.Second, 11*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i, s := range shares {
		err := (s - 0.25) * 100
		worst = math.Max(worst, math.Abs(err))
		t.Logf("tenant %d (%s, %d µs kernels, share 25%%): achieved %.2f%% (error %+.2f pp) over 10 s", i, ts[i].kind, ts[i].us, s*100, err)
	}
	t.Logf("largest error %.2f pp", worst)
	if worst > 5 {
		t.Errorf("a tenant is %.2f pp from its 25%% share", worst)
	}
}

// Without the library the same tenants do not share fairly (so the test above
// measures the pacing, not the simulator); a lone tenant is held to its share
// unless the platform allows bursting.
func TestComputeShareControlsAndBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 3 s")
	}
	// three simulated GPUs side by side
	groups := [][]tenant{
		{{"kernel", 500, 0, false}, {"ex", 1000, 0, false}, {"coop", 2000, 0, false}, {"graph", 4000, 0, false}},
		{{"ptsz", 1000, 25, false}},
		{{"kernel", 1000, 25, true}},
	}
	results := make([][]float64, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = runTenants(t, g, 500*time.Millisecond, 2500*time.Millisecond)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	unpaced, alone, burst := results[0], results[1], results[2]
	var spread float64
	for _, s := range unpaced {
		spread = math.Max(spread, math.Abs(s-0.25)*100)
	}
	t.Logf("without the library: %.1f%% %.1f%% %.1f%% %.1f%%", unpaced[0]*100, unpaced[1]*100, unpaced[2]*100, unpaced[3]*100)
	t.Logf("alone at 25%%: %.2f%%; alone at 25%% with burst: %.2f%%", alone[0]*100, burst[0]*100)
	if spread <= 5 {
		t.Errorf("unpaced tenants already share within %.1f pp: the four-tenant test would prove nothing", spread)
	}
	if math.Abs(alone[0]-0.25) > 0.05 {
		t.Errorf("a lone tenant at 25%% without burst got %.2f%%", alone[0]*100)
	}
	if burst[0] < 0.9 {
		t.Errorf("a lone tenant allowed to burst got %.2f%%, want the idle GPU", burst[0]*100)
	}
}

func splitLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

func parseFloat(line, prefix string, v *float64) {
	if rest, ok := strings.CutPrefix(line, prefix); ok {
		if f, err := strconv.ParseFloat(rest, 64); err == nil {
			*v = f
		}
	}
}
