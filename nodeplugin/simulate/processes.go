package simulate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// A simulated GPU's memory lives in a state file that the fake driver
// library (nodeplugin/shim/fake) maps in every container on the GPU: the
// simulated silicon, shared as a real GPU's memory is. The node plugin gives
// each container the state file of its GPU (cdispec), and its simulated
// NVML reads the processes the fake records there, as real NVML reports
// them: host PIDs and the memory each holds. A process whose PID is gone
// has its memory freed, as the driver frees a dead process's memory.
//
// The layout (fakegpu.h, struct fake_shared's fixed part): magic, mem_used
// and the table of processes at fixed offsets.
const (
	fakeMagic        = 0x32555047454b4146 // "FAKEGPU2"
	fakeOffMemUsed   = 8
	fakeOffProcs     = 64
	fakeProcSize     = 32
	fakeProcs        = 256
	fakeStateMinSize = fakeOffProcs + fakeProcSize*fakeProcs

	fakeProcLive = 2
	fakeProcBusy = 1
	fakeProcFree = 0

	// entry fields
	fpState = 0
	fpPID   = 4
	fpPIDNS = 8
	fpStart = 16
	fpUsed  = 24
)

// StateFile is where the simulated GPU uuid keeps its state, in dir.
func StateFile(dir, uuid string) string { return filepath.Join(dir, uuid+".fakegpu") }

// AttachProcesses gives every GPU of the simulated node a state file in dir
// (empty: the first process of the fake driver lays it out) and makes its
// NVML process list read it. procRoot is the host's /proc, where the
// processes' PID namespaces are resolved.
func AttachProcesses(s *server.Server, dir, procRoot string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("simulated GPUs' state: %w", err)
	}
	for _, d := range s.Devices {
		dev, ok := d.(*server.Device)
		if !ok {
			continue
		}
		st := &gpuState{path: StateFile(dir, dev.UUID), procRoot: procRoot}
		f, err := os.OpenFile(st.path, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			return fmt.Errorf("simulated GPU %s: %w", dev.UUID, err)
		}
		// every container user on the GPU opens it (the umask would not let them)
		err = f.Chmod(0o666)
		f.Close()
		if err != nil {
			return fmt.Errorf("simulated GPU %s: %w", dev.UUID, err)
		}
		dev.GetComputeRunningProcessesFunc = st.processes
	}
	return nil
}

// gpuState reads one simulated GPU's state file.
type gpuState struct {
	path     string
	procRoot string
	mu       sync.Mutex
	m        []byte          // mapped once the fake has laid the file out
	hosts    map[nsPID]int32 // PIDs resolved before
}

// nsPID is a process as the fake records it.
type nsPID struct {
	ns, pid uint32
	start   uint64
}

func (g *gpuState) processes() ([]nvml.ProcessInfo, nvml.Return) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		m, err := mapState(g.path)
		if err != nil || m == nil {
			return nil, nvml.SUCCESS // no process has used the GPU yet
		}
		g.m = m
	}
	out, err := g.read()
	if err != nil {
		// a container rewrote the file under us; lay it out again next time
		syscall.Munmap(g.m)
		g.m = nil
		return nil, nvml.ERROR_UNKNOWN
	}
	return out, nvml.SUCCESS
}

func mapState(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() < fakeStateMinSize {
		return nil, err
	}
	return syscall.Mmap(int(f.Fd()), 0, fakeStateMinSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
}

// read lists the live processes and frees the memory of the gone ones. The
// file is writable from every container on the GPU: a fault (the file was
// truncated) is an error, not a crash.
func (g *gpuState) read() (out []nvml.ProcessInfo, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("simulated GPU state %s: %v", g.path, r)
		}
	}()
	if atomic.LoadUint64(g.u64(0)) != fakeMagic {
		return nil, nil
	}
	var r resolver
	r.root = procRootOr(g.procRoot)
	if g.hosts == nil {
		g.hosts = map[nsPID]int32{}
	}
	seen := map[nsPID]bool{}
	for i := range fakeProcs {
		e := fakeOffProcs + i*fakeProcSize
		if atomic.LoadUint32(g.u32(e+fpState)) != fakeProcLive {
			continue
		}
		k := nsPID{ns: atomic.LoadUint32(g.u32(e + fpPIDNS)), pid: atomic.LoadUint32(g.u32(e + fpPID)), start: atomic.LoadUint64(g.u64(e + fpStart))}
		if k.ns == 0 {
			continue // recorded without /proc: nothing to find it by
		}
		host, ok := g.hosts[k]
		if !ok || !r.same(host, k) {
			host, ok = r.find(k)
		}
		if !ok {
			g.reap(e, k)
			continue
		}
		g.hosts[k], seen[k] = host, true
		if used := atomic.LoadUint64(g.u64(e + fpUsed)); used > 0 {
			out = append(out, nvml.ProcessInfo{Pid: uint32(host), UsedGpuMemory: used, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF})
		}
	}
	for k := range g.hosts {
		if !seen[k] {
			delete(g.hosts, k)
		}
	}
	return out, nil
}

// reap frees a gone process's memory and its entry, with the fake's own
// protocol (LIVE -> BUSY -> FREE), if the entry still is that process.
func (g *gpuState) reap(e int, k nsPID) {
	if !atomic.CompareAndSwapUint32(g.u32(e+fpState), fakeProcLive, fakeProcBusy) {
		return
	}
	if atomic.LoadUint32(g.u32(e+fpPIDNS)) != k.ns || atomic.LoadUint32(g.u32(e+fpPID)) != k.pid || atomic.LoadUint64(g.u64(e+fpStart)) != k.start {
		atomic.StoreUint32(g.u32(e+fpState), fakeProcLive)
		return
	}
	used := atomic.SwapUint64(g.u64(e+fpUsed), 0)
	for memUsed := g.u64(fakeOffMemUsed); ; {
		m := atomic.LoadUint64(memUsed)
		if atomic.CompareAndSwapUint64(memUsed, m, m-min(m, used)) {
			break
		}
	}
	atomic.StoreUint32(g.u32(e+fpState), fakeProcFree)
}

func (g *gpuState) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&g.m[off])) }
func (g *gpuState) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&g.m[off])) }

func procRootOr(root string) string {
	if root == "" {
		return "/proc"
	}
	return root
}

// resolver finds the host PID of a process known by its PID namespace and
// its PID there: the process whose /proc/<pid>/ns/pid is that namespace and
// whose NSpid (the PIDs of its namespaces, outermost first) ends with that
// PID, with the same start time. It reads /proc once per pass, and only when
// a process it has not seen before needs it.
type resolver struct {
	root  string
	index map[nsPID]int32
}

// same tells whether host still is the process k.
func (r *resolver) same(host int32, k nsPID) bool {
	ns, nspid, start, ok := r.identity(host)
	return ok && ns == k.ns && nspid == k.pid && start == k.start
}

func (r *resolver) find(k nsPID) (int32, bool) {
	if r.index == nil {
		r.index = map[nsPID]int32{}
		entries, _ := os.ReadDir(r.root)
		for _, e := range entries {
			pid, err := strconv.ParseInt(e.Name(), 10, 32)
			if err != nil {
				continue
			}
			if ns, nspid, start, ok := r.identity(int32(pid)); ok {
				r.index[nsPID{ns, nspid, start}] = int32(pid)
			}
		}
	}
	host, ok := r.index[k]
	return host, ok
}

// identity is a host process's PID namespace, its PID there and its start
// time.
func (r *resolver) identity(host int32) (ns, nspid uint32, start uint64, ok bool) {
	dir := filepath.Join(r.root, strconv.Itoa(int(host)))
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(dir, "ns", "pid"), &st) != nil {
		return 0, 0, 0, false
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, 0, 0, false
	}
	_, rest, found := bytes.Cut(status, []byte("\nNSpid:"))
	if !found {
		return 0, 0, 0, false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	fields := bytes.Fields(line)
	if len(fields) == 0 {
		return 0, 0, 0, false
	}
	last, err := strconv.ParseUint(string(fields[len(fields)-1]), 10, 32)
	if err != nil {
		return 0, 0, 0, false
	}
	start, ok = startTime(dir)
	return uint32(st.Ino), uint32(last), start, ok
}

// startTime is the start time of the process whose /proc directory is dir,
// in clock ticks after boot (field 22 of its stat file).
func startTime(dir string) (uint64, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	// fields after the command, which is field 2: state is field 3
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(fields[19]), 10, 64)
	return v, err == nil
}
