package accounting_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	shimtest.Cleanup()
	os.Exit(code)
}

// The Go reader must follow the C header's layout field by field.
func TestLayoutMatchesHeader(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(shimtest.SourceDir(), "include", "gpuslice.h"))
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define (GPUSLICE_\w+) (.+)$`).FindAllStringSubmatch(string(src), -1) {
		defs[m[1]] = strings.TrimSpace(m[2])
	}
	num := func(name string) uint64 {
		v, ok := defs[name]
		if !ok {
			t.Fatalf("%s not defined in gpuslice.h", name)
		}
		v = strings.TrimSuffix(strings.TrimSuffix(strings.Fields(v)[0], "ULL"), "u")
		n, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			t.Fatalf("%s = %q: %v", name, v, err)
		}
		return n
	}
	for name, want := range map[string]uint64{
		"GPUSLICE_REGION_MAGIC":           accounting.Magic,
		"GPUSLICE_REGION_VERSION":         accounting.Version,
		"GPUSLICE_HEADER_SIZE":            accounting.HeaderSize,
		"GPUSLICE_SLOT_SIZE":              accounting.SlotSize,
		"GPUSLICE_SLOT_COUNT":             accounting.SlotCount,
		"GPUSLICE_FLAG_COMPUTE_BURST":     accounting.FlagComputeBurst,
		"GPUSLICE_SLOT_LIVE":              accounting.SlotLive,
		"GPUSLICE_OFF_MAGIC":              0,
		"GPUSLICE_OFF_VERSION":            8,
		"GPUSLICE_OFF_HEADER_SIZE":        12,
		"GPUSLICE_OFF_SLOT_SIZE":          16,
		"GPUSLICE_OFF_SLOT_COUNT":         20,
		"GPUSLICE_OFF_MEMORY_LIMIT":       24,
		"GPUSLICE_OFF_COMPUTE_SHARE":      32,
		"GPUSLICE_OFF_FLAGS":              36,
		"GPUSLICE_OFF_CREATED_UNIX_NS":    40,
		"GPUSLICE_OFF_COMPUTE_WINDOW_MS":  48,
		"GPUSLICE_OFF_USED":               64,
		"GPUSLICE_OFF_HIGH_WATER":         72,
		"GPUSLICE_OFF_OOM_COUNT":          80,
		"GPUSLICE_OFF_RECLAIMED_BYTES":    88,
		"GPUSLICE_OFF_RECLAIMED_PROCS":    96,
		"GPUSLICE_OFF_ATTACH_COUNT":       104,
		"GPUSLICE_OFF_PACE_TOKENS_NS":     128,
		"GPUSLICE_OFF_GPU_BUSY_NS":        144,
		"GPUSLICE_OFF_THROTTLED_NS":       152,
		"GPUSLICE_OFF_LAUNCHES":           160,
		"GPUSLICE_SLOT_OFF_STATE":         0,
		"GPUSLICE_SLOT_OFF_PID":           4,
		"GPUSLICE_SLOT_OFF_USED":          16,
		"GPUSLICE_SLOT_OFF_CONTEXT_BYTES": 24,
		"GPUSLICE_SLOT_OFF_ALLOCATIONS":   32,
		"GPUSLICE_SLOT_OFF_GPU_BUSY_NS":   40,
		"GPUSLICE_SLOT_OFF_LAUNCHES":      48,
		"GPUSLICE_SLOT_OFF_OOM_COUNT":     56,
		"GPUSLICE_SLOT_OFF_COMM":          64,
		"GPUSLICE_MAX_HEADER_SIZE":        accounting.MaxHeaderSize,
		"GPUSLICE_MAX_SLOT_SIZE":          accounting.MaxSlotSize,
		"GPUSLICE_MAX_SLOT_COUNT":         accounting.MaxSlotCount,
		// the limits file
		"GPUSLICE_LIMITS_MAGIC":                 accounting.LimitsMagic,
		"GPUSLICE_LIMITS_VERSION":               accounting.LimitsVersion,
		"GPUSLICE_LIMITS_SIZE":                  accounting.LimitsSize,
		"GPUSLICE_LIMITS_OFF_MAGIC":             0,
		"GPUSLICE_LIMITS_OFF_VERSION":           8,
		"GPUSLICE_LIMITS_OFF_SIZE":              12,
		"GPUSLICE_LIMITS_OFF_MEMORY_LIMIT":      16,
		"GPUSLICE_LIMITS_OFF_COMPUTE_SHARE":     24,
		"GPUSLICE_LIMITS_OFF_FLAGS":             28,
		"GPUSLICE_LIMITS_OFF_COMPUTE_WINDOW_MS": 32,
		"GPUSLICE_LIMITS_OFF_SAMPLE_PERIOD_MS":  36,
		"GPUSLICE_LIMITS_OFF_CONTEXT_OVERHEAD":  40,
		"GPUSLICE_LIMITS_OFF_CREATED_UNIX_NS":   48,
		"GPUSLICE_LIMITS_OFF_OBSERVED_USED":     64,
		"GPUSLICE_LIMITS_OFF_OBSERVED_SEQ":      72,
		"GPUSLICE_LIMITS_OFF_OBSERVED_UNIX_NS":  80,
	} {
		if got := num(name); got != want {
			t.Errorf("%s: gpuslice.h says %d, the Go reader uses %d", name, got, want)
		}
	}
	if defs["GPUSLICE_LIMITS_FILE"] != `"`+accounting.LimitsFile+`"` {
		t.Errorf("GPUSLICE_LIMITS_FILE is %s, the Go writer uses %q", defs["GPUSLICE_LIMITS_FILE"], accounting.LimitsFile)
	}
	// every field the Go side encodes is where the C structure has it
	l := accounting.Limits{MemoryLimit: 0x1111, ComputeShare: 0x22, ComputeWindow: 0x33 * time.Millisecond, SamplePeriod: 0x44 * time.Millisecond,
		ContextOverhead: 0x55, Created: time.Unix(0, 0x66), ObservedUsed: 0x77, ObservedSeq: 0x88, Observed: time.Unix(0, 0x99), Burst: true}
	b := accounting.EncodeLimits(l)
	for off, want := range map[string]uint64{"MEMORY_LIMIT": 0x1111, "COMPUTE_SHARE": 0x22, "COMPUTE_WINDOW_MS": 0x33, "SAMPLE_PERIOD_MS": 0x44,
		"CONTEXT_OVERHEAD": 0x55, "CREATED_UNIX_NS": 0x66, "OBSERVED_USED": 0x77, "OBSERVED_SEQ": 0x88, "OBSERVED_UNIX_NS": 0x99, "FLAGS": accounting.FlagComputeBurst} {
		o := num("GPUSLICE_LIMITS_OFF_" + off)
		if got := uint64(b[o]); got != want&0xff {
			t.Errorf("limits field %s: byte at %d is %#x, want %#x", off, o, got, want&0xff)
		}
	}
	if !strings.Contains(defs["GPUSLICE_LOCK_INIT"], "1ULL << 30") || accounting.LockInit != 1<<30 ||
		!strings.Contains(defs["GPUSLICE_LOCK_SLOT0"], "+ 64") || accounting.LockSlot0 != 1<<30+64 ||
		!strings.Contains(defs["GPUSLICE_LOCK_PRESENCE"], "+ 1") || accounting.LockPresence != 1<<30+1 {
		t.Errorf("lock offsets differ: %q %q %q", defs["GPUSLICE_LOCK_INIT"], defs["GPUSLICE_LOCK_PRESENCE"], defs["GPUSLICE_LOCK_SLOT0"])
	}
}

func TestDecodeRejects(t *testing.T) {
	if _, err := accounting.Decode(make([]byte, accounting.RegionSize)); err != accounting.ErrNotRegion {
		t.Errorf("zeroes: %v", err)
	}
	b := accounting.Encode(8<<30, 25, false, 100*time.Millisecond, time.Now())
	b[8] = 2
	if _, err := accounting.Decode(b); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("version 2: %v", err)
	}
	b = accounting.Encode(8<<30, 25, false, 100*time.Millisecond, time.Now())
	if _, err := accounting.Decode(b[:1000]); err == nil {
		t.Error("truncated region accepted")
	}
}

// A region created in Go is used by the C library, and what the library
// writes reads back here, field by field.
func TestCrossCheckWithLibrary(t *testing.T) {
	e := shimtest.NewEnv(t, 8*shimtest.GiB)
	if err := accounting.Create(e.Region(), 8*shimtest.GiB, 40, true, 250*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cmd := e.Command(true, "gs_probe", "interactive")
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewScanner(outp)
	say := func(line string) string {
		if line != "" {
			io.WriteString(in, line+"\n")
		}
		if !out.Scan() {
			t.Fatalf("probe ended: %v", out.Err())
		}
		return out.Text()
	}
	if got := say(""); !strings.HasPrefix(got, "ready ") {
		t.Fatalf("probe said %q", got)
	}
	for _, n := range []int{1 * shimtest.GiB, 2 * shimtest.GiB} {
		if got := say("alloc " + strconv.Itoa(n)); !strings.HasPrefix(got, "ok ") {
			t.Fatalf("alloc %d: %s", n, got)
		}
	}
	usedLine := say("used") // "used U free F total T", from the library's view

	r, err := accounting.ReadFile(e.Region())
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(3*shimtest.GiB + shimtest.ContextBytes)
	if r.Used != want || r.MemoryLimit != 8*shimtest.GiB || r.ComputeShare != 40 || !r.Burst ||
		r.ComputeWindow != 250*time.Millisecond || r.HighWater != want {
		t.Errorf("region = used %d limit %d share %d burst %v window %v high %d; want used %d, the limits Create wrote",
			r.Used, r.MemoryLimit, r.ComputeShare, r.Burst, r.ComputeWindow, r.HighWater, want)
	}
	if !strings.HasPrefix(usedLine, "used "+strconv.FormatUint(want, 10)+" free "+strconv.FormatUint(8*shimtest.GiB-want, 10)+" total 8589934592") {
		t.Errorf("library reports %q, the region %d", usedLine, r.Used)
	}
	if len(r.Processes) != 1 {
		t.Fatalf("processes: %+v", r.Processes)
	}
	p := r.Processes[0]
	if !p.Alive || p.PID != uint32(cmd.Process.Pid) || p.Command != "gs_probe" || p.Used != want ||
		p.ContextBytes != shimtest.ContextBytes || p.Allocations != 2 || time.Since(p.Attached) > time.Minute {
		t.Errorf("process = %+v, want alive pid %d gs_probe using %d with 2 allocations", p, cmd.Process.Pid, want)
	}

	cmd.Process.Kill()
	cmd.Wait()
	r, err = accounting.ReadFile(e.Region())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Processes) != 1 || r.Processes[0].Alive || r.Used != want {
		t.Errorf("after kill -9: used %d, processes %+v; want the dead process listed, not alive, until reclaimed", r.Used, r.Processes)
	}
}

// A region the library creates by itself carries a copy of the limits
// file's limits, never the environment's.
func TestRegionCreatedByLibrary(t *testing.T) {
	e := shimtest.NewEnv(t, 4*shimtest.GiB)
	l := shimtest.Limits(4 * shimtest.GiB)
	l.ComputeShare, l.ComputeWindow = 50, 200*time.Millisecond
	e.WriteLimits(t, l)
	e.Vars = append(e.Vars, "GPUSLICE_MEMORY_LIMIT=8Gi", "GPUSLICE_COMPUTE_SHARE=25", "GPUSLICE_COMPUTE_WINDOW_MS=50", "GPUSLICE_COMPUTE_BURST=1")
	if out, err := e.Command(true, "gs_probe", "info").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r, err := accounting.ReadFile(e.Region())
	if err != nil {
		t.Fatal(err)
	}
	if r.MemoryLimit != 4*shimtest.GiB || r.ComputeShare != 50 || r.Burst || r.ComputeWindow != 200*time.Millisecond ||
		r.Attaches != 1 || r.Used != shimtest.ContextBytes {
		t.Errorf("region %+v, want the limits file's 4 GiB, 50 %%, 200 ms, no burst", r)
	}
	st, err := os.Stat(e.Region())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o666 {
		t.Errorf("region mode %v: every container user of the claim must open it", st.Mode().Perm())
	}
}

// The limits file round-trips, is rewritten in place (the inode a
// container has mounted stays the file), and an observation lands in it
// without touching the limits.
func TestLimitsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), accounting.LimitsFile)
	l := accounting.Limits{MemoryLimit: 8 << 30, ComputeShare: 25, ComputeWindow: 100 * time.Millisecond, SamplePeriod: 200 * time.Millisecond,
		ContextOverhead: 300 << 20, Created: time.Unix(1700000000, 0)}
	if err := accounting.WriteLimits(path, l); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	if before.Mode().Perm() != 0o644 || before.Size() != accounting.LimitsSize {
		t.Errorf("limits file mode %v size %d, want 0644 and %d bytes", before.Mode().Perm(), before.Size(), accounting.LimitsSize)
	}
	o, err := accounting.OpenObserver(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000001, 5)
	o.Observe(3<<30, at)
	o.Observe(5<<30, at)
	o.Close()
	if err := accounting.WriteLimits(path, l); err != nil { // a restarted plugin prepares again
		t.Fatal(err)
	}
	got, err := accounting.ReadLimits(path)
	if err != nil {
		t.Fatal(err)
	}
	want := l
	want.ObservedUsed, want.ObservedSeq, want.Observed = 5<<30, 4, at
	if got != want {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Error("the limits file was replaced, not rewritten in place")
	}
	for _, bad := range []accounting.Limits{{ComputeShare: 25, ComputeWindow: time.Second}, {MemoryLimit: 1, ComputeShare: 101, ComputeWindow: time.Second},
		{MemoryLimit: 1, ComputeShare: 10}} {
		if err := accounting.WriteLimits(path, bad); err == nil {
			t.Errorf("limits %+v written", bad)
		}
	}
}

// A region any process of the claim may have written: the reader returns
// an error or a bounded snapshot, never reads past what it mapped, and
// never copies more than the largest legal region, whatever the file says.
func TestReadFileOfHostileRegions(t *testing.T) {
	dir := t.TempDir()
	good := accounting.Encode(8<<30, 25, false, 100*time.Millisecond, time.Now())
	le := binary.LittleEndian
	with := func(f func(b []byte)) []byte { b := append([]byte(nil), good...); f(b); return b }
	cases := map[string][]byte{
		"huge geometry":        with(func(b []byte) { le.PutUint32(b[12:], 1<<31); le.PutUint32(b[16:], 1<<31); le.PutUint32(b[20:], 1<<31) }),
		"geometry past bounds": with(func(b []byte) { le.PutUint32(b[12:], accounting.MaxHeaderSize+64) }),
		"slots past the file":  with(func(b []byte) { le.PutUint32(b[20:], accounting.MaxSlotCount) }),
		"every slot live": with(func(b []byte) {
			for i := accounting.HeaderSize; i < len(b); i += accounting.SlotSize {
				b[i] = 1
			}
		}),
		"garbage with magic": append(good[:8:8], bytes.Repeat([]byte{0xFF}, accounting.RegionSize)...),
		"short":              good[:100],
	}
	for name, b := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, b, 0o666); err != nil {
			t.Fatal(err)
		}
		r, err := accounting.ReadFile(path)
		if err == nil && len(r.Processes) > accounting.SlotCount {
			t.Errorf("%s: %d processes from a region of %d slots", name, len(r.Processes), accounting.SlotCount)
		}
		t.Logf("%s: %v", name, err)
	}
	// a sparse file far larger than any region
	path := filepath.Join(dir, "sparse")
	if err := os.WriteFile(path, good, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<40); err != nil {
		t.Fatal(err)
	}
	if _, err := accounting.ReadFile(path); err != nil {
		t.Errorf("a valid region in a 1 TiB sparse file: %v", err)
	}
}
func TestCreateKeepsExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r")
	if err := accounting.Create(path, 1<<30, 50, false, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := accounting.Create(path, 2<<30, 10, true, time.Second); err != nil {
		t.Fatal(err)
	}
	r, err := accounting.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.MemoryLimit != 1<<30 || r.ComputeShare != 50 {
		t.Errorf("existing region changed: %+v", r)
	}
	os.WriteFile(path, []byte("not a region at all, but long enough to look at...................."), 0o666)
	if err := accounting.Create(path, 1<<30, 50, false, time.Second); err == nil {
		t.Error("an unusable region was accepted")
	}
}
