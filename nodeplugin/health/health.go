// Package health watches each GPU of the node through NVML and says which
// are unhealthy, and why: a critical XID that is the GPU's fault (xid.go),
// a double-bit (uncorrectable) ECC error, or a GPU that stops answering.
// A GPU is healthy again once it has answered with no new fault for the
// recovery time, so one that keeps failing never flaps back into service.
// The plugin taints every device of an unhealthy GPU and refuses to
// prepare claims on it.
package health

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
)

// Reasons, the value of a tainted device's taint (a label value).
const (
	ReasonDoubleBitECC = "ecc-double-bit"
	ReasonLost         = "gpu-lost"
	ReasonNoAnswer     = "gpu-not-answering"
)

// ReasonXID is the reason of a critical XID, e.g. xid-79.
func ReasonXID(xid uint64) string { return fmt.Sprintf("xid-%d", xid) }

// Fault is why a GPU is unhealthy.
type Fault struct {
	Reason  string // Reason*, a label value
	Message string // what happened, for people
	// Since is when the GPU turned unhealthy; Last the latest fault, from
	// which the recovery time runs.
	Since, Last time.Time
}

// Config says what to watch.
type Config struct {
	NVML nvml.Interface
	GPUs []discovery.GPU
	// Recovery is how long a GPU must answer with no new fault to be
	// healthy again.
	Recovery time.Duration
	// Poll is how often each GPU is read to see that it answers, and how
	// long one wait for events lasts.
	Poll time.Duration
	// OnChange is called (from the watcher's goroutine) whenever a GPU
	// turns unhealthy, changes reason or recovers.
	OnChange func()
	Logger   klog.Logger
	Clock    clock.PassiveClock // the real clock if nil
}

// Watcher is a running health watcher.
type Watcher struct {
	cfg    Config
	byUUID map[string]discovery.GPU
	set    nvml.EventSet

	// ecc is each GPU's volatile uncorrected ECC count at its last
	// reading (the watcher's goroutine only)
	ecc map[string]uint64

	mu     sync.Mutex
	faults map[string]Fault // by GPU UUID
}

// Start registers for the GPUs' critical XID and double-bit ECC events and
// watches them until ctx ends. A GPU whose driver delivers no events is
// still watched for answering.
func Start(ctx context.Context, cfg Config) (*Watcher, error) {
	if cfg.Recovery <= 0 || cfg.Poll <= 0 {
		return nil, fmt.Errorf("health watcher: recovery time (%v) and poll interval (%v) must be positive", cfg.Recovery, cfg.Poll)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	w := &Watcher{cfg: cfg, byUUID: map[string]discovery.GPU{}, ecc: map[string]uint64{}, faults: map[string]Fault{}}
	for _, g := range cfg.GPUs {
		w.byUUID[g.UUID] = g
	}
	if len(cfg.GPUs) > 0 {
		set, ret := cfg.NVML.EventSetCreate()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("health watcher: create an NVML event set: %v", ret)
		}
		w.set = set
		for _, g := range cfg.GPUs {
			if err := w.register(g); err != nil {
				// polling still sees the GPU stop answering
				cfg.Logger.Info("GPU health: no XID or ECC events from this GPU; only watching that it answers", "index", g.Index, "uuid", g.UUID, "err", err)
			}
		}
	}
	go w.run(ctx)
	return w, nil
}

func (w *Watcher) register(g discovery.GPU) error {
	dev, ret := w.cfg.NVML.DeviceGetHandleByUUID(g.UUID)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("get the GPU's handle: %v", ret)
	}
	supported, ret := dev.GetSupportedEventTypes()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("read the GPU's event types: %v", ret)
	}
	want := supported & (nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError)
	if want == 0 {
		return errors.New("the GPU reports neither XID nor double-bit ECC events")
	}
	if ret := dev.RegisterEvents(want, w.set); ret != nvml.SUCCESS {
		return fmt.Errorf("register for XID and ECC events: %v", ret)
	}
	return nil
}

// Unhealthy returns the unhealthy GPUs' faults by UUID.
func (w *Watcher) Unhealthy() map[string]Fault {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.faults)
}

// Fault returns why the GPU is unhealthy, or false if it is healthy.
func (w *Watcher) Fault(uuid string) (Fault, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f, ok := w.faults[uuid]
	return f, ok
}

func (w *Watcher) run(ctx context.Context) {
	if w.set != nil {
		defer w.set.Free()
	}
	next := w.cfg.Clock.Now()
	for ctx.Err() == nil {
		w.waitEvent(ctx)
		// one time for the readings and the recovery, so a GPU still
		// failing its readings is never found quiet for long enough
		now := w.cfg.Clock.Now()
		if !now.Before(next) {
			w.checkAnswers(now)
			next = now.Add(w.cfg.Poll)
		}
		w.recover(now)
	}
}

// waitEvent waits up to one poll interval for an event and records it.
func (w *Watcher) waitEvent(ctx context.Context) {
	if w.set == nil {
		t := time.NewTimer(w.cfg.Poll)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return
	}
	e, ret := w.set.Wait(uint32(w.cfg.Poll.Milliseconds()))
	switch ret {
	case nvml.SUCCESS:
		w.event(e)
	case nvml.ERROR_TIMEOUT:
	default:
		// a lost GPU can fail the wait at once: wait out the interval
		// rather than spin; its readings say it is lost
		t := time.NewTimer(w.cfg.Poll)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

func (w *Watcher) event(e nvml.EventData) {
	var reason, msg string
	switch e.EventType {
	case nvml.EventTypeXidCriticalError:
		if meaning, app := ApplicationXID(e.EventData); app {
			w.cfg.Logger.Info("GPU health: XID that is the application's fault; the GPU stays healthy", "xid", e.EventData, "meaning", meaning)
			return
		}
		reason = ReasonXID(e.EventData)
		msg = fmt.Sprintf("critical XID %d", e.EventData)
		if m := XIDMeaning(e.EventData); m != "" {
			msg += ": " + m
		}
	case nvml.EventTypeDoubleBitEccError:
		reason, msg = ReasonDoubleBitECC, "double-bit (uncorrectable) ECC error"
	default:
		return
	}
	uuids := w.eventGPUs(e)
	for _, u := range uuids {
		w.fault(w.cfg.Clock.Now(), u, reason, msg)
	}
}

// eventGPUs are the GPUs an event is about: its device's, or every GPU when
// the driver names none (an XID it cannot attribute) or one not watched.
func (w *Watcher) eventGPUs(e nvml.EventData) []string {
	if e.Device != nil {
		if u, ret := e.Device.GetUUID(); ret == nvml.SUCCESS {
			if _, ok := w.byUUID[u]; ok {
				return []string{u}
			}
		}
	}
	var all []string
	for u := range w.byUUID {
		all = append(all, u)
	}
	return all
}

// checkAnswers reads each GPU's memory, the reading every part of the
// plugin depends on: a GPU that cannot answer it is unhealthy. It reads the
// volatile uncorrected ECC count too, which catches what the driver
// delivers no event for: errors since the driver loaded, before the
// plugin started (a count above 0 at the first reading), and a driver that
// does not report ECC events. A GPU with ECC off answers NOT_SUPPORTED.
func (w *Watcher) checkAnswers(now time.Time) {
	for u, g := range w.byUUID {
		dev, ret := w.cfg.NVML.DeviceGetHandleByUUID(u)
		if ret == nvml.SUCCESS {
			_, ret = dev.GetMemoryInfo()
		}
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_GPU_IS_LOST:
			w.fault(now, u, ReasonLost, fmt.Sprintf("GPU %d fell off the bus: NVML answers %v", g.Index, ret))
			continue
		default:
			w.fault(now, u, ReasonNoAnswer, fmt.Sprintf("NVML cannot read GPU %d: %v", g.Index, ret))
			continue
		}
		n, ret := dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		if ret != nvml.SUCCESS {
			continue
		}
		if prev, seen := w.ecc[u]; n > prev || (!seen && n > 0) {
			w.fault(now, u, ReasonDoubleBitECC, fmt.Sprintf("%d uncorrectable ECC errors since the driver loaded", n))
		}
		w.ecc[u] = n
	}
}

func (w *Watcher) fault(now time.Time, uuid, reason, msg string) {
	w.mu.Lock()
	f, was := w.faults[uuid]
	if !was {
		f.Since = now
	}
	changed := !was || f.Reason != reason
	f.Reason, f.Message, f.Last = reason, msg, now
	w.faults[uuid] = f
	w.mu.Unlock()
	if changed {
		g := w.byUUID[uuid]
		w.cfg.Logger.Info("GPU unhealthy", "index", g.Index, "uuid", uuid, "reason", reason, "message", msg)
		w.cfg.OnChange()
	}
}

// recover clears the faults of GPUs quiet for the recovery time.
func (w *Watcher) recover(now time.Time) {
	var healed []string
	w.mu.Lock()
	for u, f := range w.faults {
		if now.Sub(f.Last) >= w.cfg.Recovery {
			delete(w.faults, u)
			healed = append(healed, u)
		}
	}
	w.mu.Unlock()
	for _, u := range healed {
		w.cfg.Logger.Info("GPU healthy again", "index", w.byUUID[u].Index, "uuid", u, "quietFor", w.cfg.Recovery)
	}
	if len(healed) > 0 {
		w.cfg.OnChange()
	}
}

// Clear makes the GPU healthy at once if it has had no fault after at: an
// operator's clear (see contract.HealthClearedAnnotation). A fault after at
// stays, so a clear recorded before a new fault never hides it. It reports
// whether the GPU was cleared.
func (w *Watcher) Clear(uuid string, at time.Time) bool {
	w.mu.Lock()
	f, bad := w.faults[uuid]
	cleared := bad && !f.Last.After(at)
	if cleared {
		delete(w.faults, uuid)
	}
	w.mu.Unlock()
	if !bad {
		return false
	}
	g := w.byUUID[uuid]
	if !cleared {
		w.cfg.Logger.Info("GPU health clear ignored: a fault came after it", "index", g.Index, "uuid", uuid, "clearedAt", at, "lastFault", f.Last, "reason", f.Reason)
		return false
	}
	w.cfg.Logger.Info("GPU healthy again: an operator cleared its fault", "index", g.Index, "uuid", uuid, "clearedAt", at, "reason", f.Reason)
	w.cfg.OnChange()
	return true
}
