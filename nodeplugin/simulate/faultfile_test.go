package simulate_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestFaultFile: the faults appended to the simulated driver's fault log
// reach NVML as a real driver's do, in order; lines before the plugin
// started and lines it cannot read are not injected.
func TestFaultFile(t *testing.T) {
	s := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, "faults")
	path := simulate.FaultFile(t.TempDir())
	if err := os.WriteFile(path, []byte("xid 1 48\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set, ret := s.EventSetCreate()
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	for _, d := range s.Devices {
		if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, set); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logged := make(chan string, 8)
	if err := simulate.WatchFaults(ctx, s, path, func(f string, a ...any) { logged <- fmt.Sprintf(f, a...) }); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("xid 1 79\nbogus 1\nlost 0\necc 1\n"); err != nil {
		t.Fatal(err)
	}
	next := func() nvml.EventData {
		t.Helper()
		e, ret := set.Wait(10000)
		if ret != nvml.SUCCESS {
			t.Fatalf("no event: %v", ret)
		}
		return e
	}
	if e := next(); e.EventType != nvml.EventTypeXidCriticalError || e.EventData != 79 || e.Device != s.Devices[1] {
		t.Fatalf("first event %+v, want XID 79 on GPU 1 (the line before the watch began is not replayed)", e)
	}
	if e := next(); e.EventType != nvml.EventTypeDoubleBitEccError || e.Device != s.Devices[1] {
		t.Fatalf("second event %+v, want a double-bit ECC error on GPU 1", e)
	}
	if msg := <-logged; !strings.Contains(msg, `"bogus 1"`) {
		t.Fatalf("logged %q, want the line it could not read", msg)
	}
	// "lost 0" came before the ECC line
	if _, ret := s.Devices[0].GetMemoryInfo(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Fatalf("GPU 0 after \"lost 0\": reading memory answers %v, want ERROR_GPU_IS_LOST", ret)
	}
	if _, ret := s.Devices[1].GetMemoryInfo(); ret != nvml.SUCCESS {
		t.Fatalf("GPU 1 reads %v", ret)
	}
}
