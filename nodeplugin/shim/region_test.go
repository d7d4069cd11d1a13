package shim_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/testenv"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/internal/shimtest"
)

// Configuration errors refuse the GPU with a message, and so does a process
// without a limits file: the library fails closed.
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
	e.Vars = []string{"GPUSLICE_MEMORY_LIMIT=8Gi"} // suffixes work too
	if got := field(t, run(t, e.Command(true, "gs_probe", "info")), "cuMemGetInfo_v2", "total"); got != slice {
		t.Errorf("8Gi: total %d", got)
	}

	e = shimtest.NewEnv(t, slice)
	os.Remove(e.LimitsFile()) // the environment alone is no configuration
	out, err = e.Command(true, "gs_probe", "info").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no limits file "+e.LimitsFile()) || !strings.Contains(string(out), "allocations are refused") {
		t.Errorf("the environment's limit and no limits file: %v\n%s", err, out)
	}
	if _, err := os.Stat(e.Region()); err == nil {
		t.Error("a region was created from the environment")
	}

	for name, content := range map[string][]byte{
		"garbage":       bytes.Repeat([]byte{0x5A}, accounting.LimitsSize),
		"short":         accounting.EncodeLimits(shimtest.Limits(slice))[:64],
		"version 2":     func() []byte { b := accounting.EncodeLimits(shimtest.Limits(slice)); b[8] = 2; return b }(),
		"no memory":     func() []byte { b := accounting.EncodeLimits(shimtest.Limits(slice)); clear(b[16:24]); return b }(),
		"share of 101%": func() []byte { b := accounting.EncodeLimits(shimtest.Limits(slice)); b[24] = 101; return b }(),
	} {
		e = shimtest.NewEnv(t, slice)
		if err := os.WriteFile(e.LimitsFile(), content, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err = e.Command(true, "gs_probe", "info").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "limits file "+e.LimitsFile()) || !strings.Contains(string(out), "allocations are refused") {
			t.Errorf("a limits file with %s: %v\n%s", name, err, out)
		}
	}

	if _, err := os.Stat(contract.ContainerLimitsPath); err == nil {
		testenv.Unavailable(t, "%s exists on this machine (a container of a claim?); cannot test a process outside one", contract.ContainerLimitsPath)
	}
	cmd := e.Command(true, "gs_probe", "info")
	var env []string
	for _, kv := range cmd.Env {
		if !strings.HasPrefix(kv, "GPUSLICE_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no limits file "+contract.ContainerLimitsPath) {
		t.Errorf("no configuration at all: %v\n%s", err, out)
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
