package health_test

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/health"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

const recovery = 5 * time.Minute

type env struct {
	t       *testing.T
	s       *server.Server
	gpus    []discovery.GPU
	clock   *testclock.FakeClock
	w       *health.Watcher
	changed chan struct{}
	stop    context.CancelFunc
}

func start(t *testing.T, spec simulate.Spec) *env {
	t.Helper()
	return startOn(t, simulate.New(spec, t.Name()))
}

func startOn(t *testing.T, s *server.Server) *env {
	t.Helper()
	return startWith(t, s, "", testclock.NewFakeClock(time.Now()))
}

// startWith starts a watcher keeping its faults in store, on clock.
func startWith(t *testing.T, s *server.Server, store string, clock *testclock.FakeClock) *env {
	t.Helper()
	e := &env{t: t, s: s, clock: clock, changed: make(chan struct{}, 64)}
	found, err := discovery.Discover(e.s)
	if err != nil {
		t.Fatal(err)
	}
	e.gpus = found.GPUs
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = func() {
		cancel()
		<-e.w.Done()
	}
	t.Cleanup(e.stop)
	e.w, err = health.Start(ctx, health.Config{Store: store,
		NVML: e.s, GPUs: e.gpus, Recovery: recovery, Poll: 10 * time.Millisecond, Clock: e.clock, Logger: ktesting.NewLogger(t, ktesting.NewConfig()),
		OnChange: func() {
			select {
			case e.changed <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// waitFor waits until the watcher's verdict on GPU i is want ("" healthy),
// woken by its change notices.
func (e *env) waitFor(i int, want string) {
	e.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f, bad := e.w.Fault(e.gpus[i].UUID)
		if (want == "" && !bad) || (bad && f.Reason == want) {
			return
		}
		select {
		case <-e.changed:
		case <-deadline:
			e.t.Fatalf("GPU %d: fault %+v (unhealthy %v), want reason %q", i, f, bad, want)
		}
	}
}

func (e *env) inject(n int, err error) {
	e.t.Helper()
	if err != nil || n != 1 {
		e.t.Fatalf("injected into %d event sets (%v), want the watcher's one", n, err)
	}
}

// TestXID: a critical XID that is the GPU's fault makes that GPU, and only
// it, unhealthy with the XID as reason; one that is the application's
// fault changes nothing; the GPU is healthy again only after the recovery
// time with no new fault.
func TestXID(t *testing.T) {
	e := start(t, simulate.Spec{Profile: "v100-32gb", Count: 2})
	e.inject(simulate.InjectXID(e.s, 0, 13)) // application's fault, delivered first
	e.inject(simulate.InjectXID(e.s, 1, 79))
	e.waitFor(1, "xid-79")
	if f, bad := e.w.Fault(e.gpus[0].UUID); bad {
		t.Fatalf("GPU 0 unhealthy after XID 13 (the application's fault): %+v", f)
	}
	if f, _ := e.w.Fault(e.gpus[1].UUID); f.Message != "critical XID 79: GPU has fallen off the bus" {
		t.Errorf("message %q", f.Message)
	}
	e.clock.Step(recovery - time.Second)
	e.inject(simulate.InjectXID(e.s, 1, 48)) // a new fault restarts the recovery time
	e.waitFor(1, "xid-48")
	e.clock.Step(time.Second)
	e.inject(simulate.InjectXID(e.s, 0, 13))
	// marks that the events before were handled: events are handled in
	// order, and only the event can give this reason (a double-bit ECC
	// error would not do: the reading of its counter may see it first,
	// leaving its event to land after the next step of the clock)
	e.inject(simulate.InjectXID(e.s, 0, 94))
	e.waitFor(0, "xid-94")
	if _, bad := e.w.Fault(e.gpus[1].UUID); !bad {
		t.Fatal("GPU 1 healthy one second after the recovery time of its first fault, though its last came later")
	}
	e.clock.Step(recovery)
	e.waitFor(1, "")
	e.waitFor(0, "")
}

// TestLost: a GPU that answers ERROR_GPU_IS_LOST is unhealthy for as long
// as it does and the recovery time after.
func TestLost(t *testing.T) {
	e := start(t, simulate.Spec{Profile: "a100-40gb", Count: 2, MIG: []string{"3g.20gb", "3g.20gb"}})
	if err := simulate.SetLost(e.s, 1, true); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(time.Second) // the next reading
	e.waitFor(1, health.ReasonLost)
	if f, bad := e.w.Fault(e.gpus[0].UUID); bad {
		t.Fatalf("GPU 0 unhealthy: %+v", f)
	}
	e.clock.Step(recovery + time.Second) // still lost: each reading is a new fault
	// the loop that handles the first event reads the GPUs at the new time
	// and is done when the second is handled
	e.inject(simulate.InjectXID(e.s, 0, 48))
	e.waitFor(0, "xid-48")
	e.inject(simulate.InjectDoubleBitECC(e.s, 0))
	e.waitFor(0, health.ReasonDoubleBitECC)
	if _, bad := e.w.Fault(e.gpus[1].UUID); !bad {
		t.Fatal("GPU 1 healthy while it was still lost")
	}
	if err := simulate.SetLost(e.s, 1, false); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(recovery + time.Second)
	e.waitFor(1, "")
}

func TestApplicationXIDs(t *testing.T) {
	for _, x := range []uint64{13, 31, 43, 45, 68} {
		if _, app := health.ApplicationXID(x); !app {
			t.Errorf("XID %d is the application's fault", x)
		}
	}
	for _, x := range []uint64{48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 999} {
		if _, app := health.ApplicationXID(x); app {
			t.Errorf("XID %d makes the GPU unhealthy", x)
		}
	}
}

// TestECCCounter: uncorrectable ECC errors counted before the watcher
// started (no event reached it) make the GPU unhealthy at its first
// reading.
func TestECCCounter(t *testing.T) {
	s := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, t.Name())
	if n, err := simulate.InjectDoubleBitECC(s, 1); err != nil || n != 0 {
		t.Fatalf("inject before any watcher: %d event sets, %v", n, err)
	}
	e := startOn(t, s)
	e.waitFor(1, health.ReasonDoubleBitECC)
	if f, _ := e.w.Fault(e.gpus[1].UUID); f.Message != "uncorrectable ECC errors since the driver loaded: 1" {
		t.Errorf("message %q", f.Message)
	}
	if f, bad := e.w.Fault(e.gpus[0].UUID); bad {
		t.Errorf("GPU 0 unhealthy: %+v", f)
	}
}

// TestECCEvent: the double-bit ECC event alone makes its GPU unhealthy,
// on a driver whose ECC counter cannot be read (so no reading of the
// counter can be what found the error).
func TestECCEvent(t *testing.T) {
	s := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, t.Name())
	for _, d := range s.Devices {
		d.(*server.Device).GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
	}
	e := startOn(t, s)
	e.inject(simulate.InjectDoubleBitECC(e.s, 1))
	e.waitFor(1, health.ReasonDoubleBitECC)
	if f, _ := e.w.Fault(e.gpus[1].UUID); f.Message != "double-bit (uncorrectable) ECC error" {
		t.Errorf("message %q", f.Message)
	}
	if f, bad := e.w.Fault(e.gpus[0].UUID); bad {
		t.Errorf("GPU 0 unhealthy: %+v", f)
	}
}

// TestClear: an operator's clear makes a GPU healthy at once when it comes
// after the GPU's last fault; one recorded before a later fault clears
// nothing, and a fault after a clear makes the GPU unhealthy again.
func TestClear(t *testing.T) {
	e := start(t, simulate.Spec{Profile: "v100-32gb", Count: 2})
	e.inject(simulate.InjectXID(e.s, 0, 79))
	e.waitFor(0, "xid-79")
	first, _ := e.w.Fault(e.gpus[0].UUID)

	if e.w.Clear(e.gpus[0].UUID, first.Last.Add(-time.Nanosecond)) {
		t.Fatal("a clear from before the fault cleared it")
	}
	if _, bad := e.w.Fault(e.gpus[0].UUID); !bad {
		t.Fatal("GPU 0 healthy after a clear from before its fault")
	}
	if e.w.Clear(e.gpus[1].UUID, e.clock.Now()) {
		t.Error("clearing the healthy GPU 1 reported a change")
	}
	clearedAt := e.clock.Now()
	if !e.w.Clear(e.gpus[0].UUID, clearedAt) {
		t.Fatal("a clear after the fault did not clear it")
	}
	e.waitFor(0, "")

	// the same clear, seen again (a watch's resync), after a new fault
	e.clock.Step(time.Second)
	e.inject(simulate.InjectXID(e.s, 0, 48))
	e.waitFor(0, "xid-48")
	if e.w.Clear(e.gpus[0].UUID, clearedAt) {
		t.Fatal("the earlier clear hid a fault that came after it")
	}
	if f, bad := e.w.Fault(e.gpus[0].UUID); !bad || !f.Since.After(clearedAt) {
		t.Fatalf("GPU 0 after a new fault: %+v (unhealthy %v), want unhealthy since after the clear", f, bad)
	}
}
