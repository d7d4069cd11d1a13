package health_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/gpuslice/gpuslice/nodeplugin/health"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// TestFaultsOutliveARestart: a GPU made unhealthy by an XID (an event the
// driver delivers once) is still unhealthy after the watcher restarts, with
// the same fault, and recovers the recovery time after its last fault,
// not after the restart; once recovered, a restart keeps it healthy.
func TestFaultsOutliveARestart(t *testing.T) {
	s := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 2}, t.Name())
	store := filepath.Join(t.TempDir(), health.StoreFile)
	clock := testclock.NewFakeClock(time.Now())
	first := startWith(t, s, store, clock)
	first.inject(simulate.InjectXID(s, 1, 79))
	first.waitFor(1, "xid-79")
	was, _ := first.w.Fault(first.gpus[1].UUID)
	first.stop()

	clock.Step(recovery / 2)
	second := startWith(t, s, store, clock)
	f, bad := second.w.Fault(second.gpus[1].UUID)
	if !bad || !f.Since.Equal(was.Since) || !f.Last.Equal(was.Last) || f.Reason != "xid-79" || f.Message != was.Message {
		t.Fatalf("GPU 1 after a restart: %+v (unhealthy %v), want the fault from before: %+v", f, bad, was)
	}
	if f, bad := second.w.Fault(second.gpus[0].UUID); bad {
		t.Fatalf("GPU 0 unhealthy after a restart: %+v", f)
	}
	clock.Step(recovery / 2)
	second.waitFor(1, "")
	second.stop()

	third := startWith(t, s, store, clock)
	if f, bad := third.w.Fault(third.gpus[1].UUID); bad {
		t.Fatalf("GPU 1 unhealthy again after a restart, though it recovered before: %+v", f)
	}
}

// TestUnreadableStore: faults kept in a format this watcher does not read,
// or a damaged file, are left aside; the watcher starts and watches.
func TestUnreadableStore(t *testing.T) {
	for _, name := range []string{"newer", "damaged"} {
		t.Run(name, func(t *testing.T) {
			s := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: 1}, t.Name())
			uuid, _ := s.Devices[0].GetUUID()
			data := []byte(`{"version":1,"fau`)
			if name == "newer" {
				data, _ = json.Marshal(map[string]any{"version": health.StoreVersion + 1,
					"faults": map[string]any{uuid: map[string]any{"reason": "xid-79", "last": time.Now()}}})
			}
			store := filepath.Join(t.TempDir(), health.StoreFile)
			if err := os.WriteFile(store, data, 0o644); err != nil {
				t.Fatal(err)
			}
			e := startWith(t, s, store, testclock.NewFakeClock(time.Now()))
			if f, bad := e.w.Fault(uuid); bad {
				t.Fatalf("GPU unhealthy from an unreadable file: %+v", f)
			}
			e.inject(simulate.InjectXID(s, 0, 79))
			e.waitFor(0, "xid-79")
			e.stop()
		})
	}
}
