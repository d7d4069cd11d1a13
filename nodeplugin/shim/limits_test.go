package shim_test

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

// The limits come from the limits file; the environment may lower them for
// the process that has it, never raise them.
func TestEnvironmentOnlyLowersLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		vars []string
		want uint64
	}{
		{"the file's", nil, slice},
		{"raised", []string{"GPUSLICE_MEMORY_LIMIT=32Gi"}, slice},
		{"lowered", []string{"GPUSLICE_MEMORY_LIMIT=2Gi"}, 2 * GiB},
	} {
		e := shimtest.NewEnv(t, slice)
		e.Vars = append([]string{"GPUSLICE_CONTEXT_OVERHEAD=" + strconv.Itoa(shimtest.ContextBytes)}, c.vars...)
		p := start(t, e.Command(true, "gs_probe", "interactive"))
		if got := p.say("used"); !strings.HasSuffix(got, " total "+strconv.FormatUint(c.want, 10)) {
			t.Errorf("%s limit: the library reports %q, want total %d", c.name, got, c.want)
		}
		if r := p.alloc(c.want - shimtest.ContextBytes + 1); r != "err 2" {
			t.Errorf("%s limit: an allocation 1 byte past %d bytes: %s, want err 2 (CUDA_ERROR_OUT_OF_MEMORY)", c.name, c.want, r)
		}
	}

	// a longer pacing window, burst on, a share of 100 %: none of them from
	// the environment
	e := shimtest.NewEnv(t, slice)
	l := shimtest.Limits(slice)
	l.ComputeShare = 25
	e.WriteLimits(t, l)
	e.Vars = append(e.Vars, "GPUSLICE_COMPUTE_SHARE=100", "GPUSLICE_COMPUTE_BURST=1", "GPUSLICE_COMPUTE_WINDOW_MS=60000", "GPUSLICE_DEBUG=1")
	out := run(t, e.Command(true, "gs_probe", "info"))
	if !strings.Contains(out, "compute share 25%, burst off, window 100 ms") {
		t.Errorf("the environment raised the compute share or turned burst on:\n%s", out)
	}
}

// A process that writes the old limit field of the region (offset 24) and
// drops the environment gains nothing: the region's copy of the limits is
// not read.
func TestRegionLimitWriteIgnored(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	run(t, e.Command(true, "gs_probe", "info")) // the region exists
	poke(t, e.Region(), 24, 32*GiB)
	poke(t, e.Region(), 32, 100) // compute share, flags
	e.Vars = nil
	p := start(t, e.Command(true, "gs_probe", "interactive"))
	if got := p.say("used"); !strings.HasSuffix(got, " total "+strconv.FormatUint(slice, 10)) {
		t.Errorf("after writing 32 GiB into the region: %q, want the limits file's total %d", got, uint64(slice))
	}
	if r := p.alloc(slice); r != "err 2" {
		t.Errorf("allocating the whole slice after the write: %s, want err 2", r)
	}
}

// Deleting the region while alone and starting a process with a larger
// limit in its environment: the new region carries the limits file's limit.
func TestRecreatedRegionTakesTheFilesLimits(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	run(t, e.Command(true, "gs_probe", "info"))
	if err := os.Remove(e.Region()); err != nil {
		t.Fatal(err)
	}
	e.Vars = []string{"GPUSLICE_MEMORY_LIMIT=32Gi", "GPUSLICE_COMPUTE_SHARE=100"}
	p := start(t, e.Command(true, "gs_probe", "interactive"))
	if got := p.say("used"); !strings.HasSuffix(got, " total "+strconv.FormatUint(slice, 10)) {
		t.Errorf("recreated region: %q, want total %d", got, uint64(slice))
	}
	if r := regionOf(t, e); r.MemoryLimit != slice {
		t.Errorf("recreated region's copy of the limit: %d, want the file's %d", r.MemoryLimit, uint64(slice))
	}
	if r := p.alloc(slice); r != "err 2" {
		t.Errorf("allocating the whole slice: %s, want err 2", r)
	}
}

// Zeroing the region's `used` while another process of the claim holds
// memory: once the plugin's observation says the memory is in use, a new
// allocation is refused.
func TestZeroedUsageRefusedByObservation(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	holder := start(t, e.Command(true, "gs_probe", "interactive"))
	if r := holder.alloc(6 * GiB); r != "ok" {
		t.Fatalf("holder: %s", r)
	}
	held := uint64(6*GiB + shimtest.ContextBytes)
	obs, err := accounting.OpenObserver(e.LimitsFile())
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	obs.Observe(held, time.Now()) // what NVML shows for the claim
	poke(t, e.Region(), 64, 0)    // used

	attacker := start(t, e.Command(true, "gs_probe", "interactive"))
	t0 := time.Now()
	if r := attacker.alloc(4 * GiB); r != "err 2" {
		t.Errorf("4 GiB after zeroing used while %d bytes are observed in use: %s, want err 2", held, r)
	}
	t.Logf("refused after %v (waited for an observation that did not come)", time.Since(t0).Round(time.Millisecond))
	// block by block: each one adds to what this process took since the
	// observation, not to the observation alone
	var got uint64
	for attacker.alloc(256*MiB) == "ok" {
		got += 256 * MiB
	}
	if room := slice - held - shimtest.ContextBytes; got > room || got < room-256*MiB {
		t.Errorf("after zeroing used, the attacker allocated %d MiB in blocks; what is left of the slice is %d MiB", got>>20, room>>20)
	}
}

// Memory freed a moment ago is still in the plugin's last observation: the
// process counts its own free against it, and where it cannot tell (the
// free and the sample within 10 ms) waits for the next observation instead
// of failing.
func TestAllocationAfterFreeIsNotRefused(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	p := start(t, e.Command(true, "gs_probe", "interactive"))
	r := p.say("alloc " + strconv.FormatUint(6*GiB, 10))
	ptr, ok := strings.CutPrefix(r, "ok ")
	if !ok {
		t.Fatalf("alloc: %s", r)
	}
	obs, err := accounting.OpenObserver(e.LimitsFile())
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	obs.Observe(regionOf(t, e).Used, time.Now())
	if r := p.say("free " + ptr); r != "rc 0" {
		t.Fatalf("free: %s", r)
	}
	// the plugin goes on sampling, as its enforcer does
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if reg, err := accounting.ReadFile(e.Region()); err == nil {
					obs.Observe(reg.Used, time.Now())
				}
			}
		}
	}()
	defer func() { close(stop); <-done }()
	if r := p.alloc(6 * GiB); r != "ok" {
		t.Errorf("6 GiB again right after freeing 6 GiB: %s", r)
	}
}

// The plugin stops (an upgrade, a rollback) just after an observation made
// while a process of the claim held memory; that process then exits. With
// no plugin sampling, the observation would hold a new process to memory
// nobody uses any more; the stopping enforcer withdraws it, and the new
// process, already waiting on the stale observation, gets its allocation.
func TestWithdrawnObservationHoldsNothing(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	obs, err := accounting.OpenObserver(e.LimitsFile())
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	// a process that held 6 GiB when the last sample was taken, gone now
	obs.Observe(6*GiB+shimtest.ContextBytes, time.Now())

	p := start(t, e.Command(true, "gs_probe", "interactive"))
	if r := p.alloc(6 * GiB); r != "err 2" {
		t.Fatalf("6 GiB under an observation of 6 GiB in use, no plugin sampling: %s, want err 2 (the observation refuses it)", r)
	}
	// the refusal waits for a next observation; the plugin stops instead,
	// before or during that wait: both must pass
	replied := make(chan string, 1)
	go func() { replied <- p.alloc(6 * GiB) }()
	obs.Withdraw()
	if r := <-replied; r != "ok" {
		t.Errorf("6 GiB of an empty 8 GiB slice once the stopping plugin withdrew its observation: %s, want ok", r)
	}
	if l, err := accounting.ReadLimits(e.LimitsFile()); err != nil || l.ObservedUsed != 0 || !l.Observed.IsZero() || l.ObservedSeq%2 != 0 {
		t.Errorf("limits file after the withdrawal: %+v (%v), want no observation under an even sequence", l, err)
	}
}

// A process that allocates and frees most of its slice in a loop, right
// after an observation, is never refused: its frees since the sample count
// as its allocations do.
func TestChurnAfterObservationIsNotRefused(t *testing.T) {
	e := shimtest.NewEnv(t, slice)
	p := start(t, e.Command(true, "gs_probe", "interactive"))
	obs, err := accounting.OpenObserver(e.LimitsFile())
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	obs.Observe(shimtest.ContextBytes, time.Now())
	for i := range 50 {
		r := p.say("alloc " + strconv.FormatUint(7*GiB, 10))
		ptr, ok := strings.CutPrefix(r, "ok ")
		if !ok {
			t.Fatalf("round %d: 7 GiB of the 8 GiB slice, just freed: %s", i, r)
		}
		if r := p.say("free " + ptr); r != "rc 0" {
			t.Fatalf("free: %s", r)
		}
	}
}

// poke writes a little-endian uint64 at off, as a process of the claim can.
func poke(t *testing.T, path string, off int64, v uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}
