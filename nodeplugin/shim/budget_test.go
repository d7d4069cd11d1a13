package shim_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/internal/testenv"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

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
		testenv.Unavailable(t, "unshare not found (util-linux): cannot run processes in their own PID namespaces")
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
		testenv.Unavailable(t, "this machine does not allow PID namespaces (%s)", strings.TrimSpace(string(out)))
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
