package redteam

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
)

// Files of red's slice as its container sees them.
var (
	regionFile = contract.ContainerAccountingDir + "/" + contract.RegionFile
	limitsFile = contract.ContainerAccountingDir + "/" + contract.LimitsFile
)

// Offsets in the region (include/gpuslice.h): the limit it carried before
// the limits file, the claim's usage and the usage of the first slots.
const (
	offRegionLimit = 24
	offRegionUsed  = 64
	offSlot0Used   = 256 + 16
	slotSize       = 128
	thirtyTwoGiB   = "34359738368"
	killedExit     = 137 // SIGKILL
)

// holdThenZero starts a process holding 4 GiB of red's slice and, once it
// holds, zeroes the region's usage count and the first slots' counts.
var holdThenZero = fmt.Sprintf("slice-check --hold 4096 --marker /tmp/held & slice-attack wait-file /tmp/held 60 && "+
	"for off in %d %d %d %d %d; do slice-attack poke %s $off 0; done; ",
	offRegionUsed, offSlot0Used, offSlot0Used+slotSize, offSlot0Used+2*slotSize, offSlot0Used+3*slotSize, regionFile)

// TestContainer attacks red's 8 GiB slice from inside its own container:
// the files that carry its limits and usage, the environment, the driver
// library, and programs that do not go through the shim (slice-attack is
// static, with the simulated driver linked in: what calling the driver
// directly is on real silicon). Each must end with the slice held, or the
// process past it stopped by the node plugin's enforcer, and blue's victim
// untouched.
func TestContainer(t *testing.T) {
	s := setup(t)
	cases := []struct {
		name, layer, script string
		check               func(t *testing.T, s *suite, r result) string
	}{
		{"region: write the limit, unset the variable, start a new process", "limits file (read-only)",
			fmt.Sprintf("slice-attack poke %s %d %s; unset %s; exec slice-check", regionFile, offRegionLimit, thirtyTwoGiB, contract.EnvMemoryLimit),
			sliceHeld},
		{"limits file: write, truncate, chmod, chown, unlink, rename, replace, link", "CDI read-only mount",
			"slice-attack tamper " + limitsFile + "; exec slice-check",
			func(t *testing.T, s *suite, r result) string {
				m := regexp.MustCompile(`(\d+) of (\d+) attempts on \S+ succeeded`).FindStringSubmatch(r.logs)
				if m == nil || m[1] != "0" {
					t.Fatalf("root in the container changed the limits file:\n%s", r.logs)
				}
				return m[2] + " of " + m[2] + " refused; " + sliceHeld(t, s, r)
			}},
		{"region: zero the usage beside a process holding memory, then allocate", "shim (NVML observation)",
			// a second later the plugin's observation holds the first process's memory
			holdThenZero + "slice-attack wait-file /tmp/never 1; slice-check",
			func(t *testing.T, s *suite, r result) string {
				got := allocated(t, r.logs)
				if got+4096 > sliceMiB {
					t.Fatalf("after zeroing the usage a second process allocated %d MiB beside the first's 4096: %d MiB on an 8192 MiB slice\n%s\nevents: %s", got, got+4096, r.logs, s.events(r.pod))
				}
				return fmt.Sprintf("the second process got %d MiB beside the first's 4096", got)
			}},
		{"region: zero the usage and at once hold more than the rest of the slice", "shim, enforcer (NVML)",
			// within the plugin's sample period the observation may not hold
			// the first process's memory yet: then the enforcer stops the second
			holdThenZero + "slice-check --hold 6144; echo \"second process: exit $?\"",
			func(t *testing.T, s *suite, r result) string {
				m := regexp.MustCompile(`second process: exit (\d+)`).FindStringSubmatch(r.logs)
				switch {
				case m == nil:
					t.Fatalf("no exit status of the second process:\n%s", r.logs)
				case m[1] == "3" && strings.Contains(r.logs, "holding allocation failed"):
					return "the second process's 6144 MiB refused"
				case m[1] == "137":
					note, ok := s.enforcerKill(t, r)
					if !ok {
						t.Fatalf("the second process was killed, but not by the enforcer:\n%s", r.logs)
					}
					return "the second process stopped by the enforcer: " + note
				}
				t.Fatalf("the second process held 6144 MiB beside the first's 4096 (exit %s):\n%s", m[1], r.logs)
				return ""
			}},
		{"region: delete it, recreate it from a raised variable", "limits file (read-only)",
			fmt.Sprintf("slice-attack unlink %s; %s=%s exec slice-check", regionFile, contract.EnvMemoryLimit, thirtyTwoGiB),
			sliceHeld},
		{"env -i: no limits in the environment", "limits file (read-only)",
			"exec slice-attack exec-clean /usr/local/bin/slice-check",
			sliceHeld},
		{"an accounting directory of its own with forged limits", "shim (fixed path)",
			fmt.Sprintf("slice-attack forge /tmp/acct %s; %s=/tmp/acct %s=%[1]s exec slice-check", thirtyTwoGiB, contract.EnvAccountingDir, contract.EnvMemoryLimit),
			sliceHeld},
		{"a copy of the driver library loaded by its path", "shim",
			"slice-attack copy /usr/lib/x86_64-linux-gnu/libcuda.so.1 /tmp/libcuda.so.1 && exec slice-check --libcuda /tmp/libcuda.so.1",
			heldOrStopped},
		{"a static program calling the driver directly past the slice", "enforcer (NVML)",
			"exec slice-attack alloc 10240 --hold",
			mustBeKilled},
		{"rename /run, forge the limits where the shim looks", "enforcer (NVML)",
			fmt.Sprintf("slice-attack rename /run /run.moved && slice-attack forge %s %s && unset %s && exec slice-check --hold 12288",
				contract.ContainerAccountingDir, thirtyTwoGiB, contract.EnvMemoryLimit),
			mustBeKilled},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := attack(t, c.layer, contained)
			name := fmt.Sprintf("c-%d", i)
			r := s.runAsTenant(t, claimTemplate(name, pkgQuarter, nil), attackPod(name, name, c.script))
			row.detail = c.check(t, s, r)
			s.victimUntouched(t)
		})
	}

	t.Run("a second container of the pod without the claim", func(t *testing.T) {
		row := attack(t, "kubelet, CDI", contained)
		pod := attackPod("c-unclaimed", "c-unclaimed", "slice-check --devices")
		withClaim := pod.Spec.Containers[0]
		withClaim.Name, withClaim.Command = "with-claim", []string{"sh", "-c", "exit 0"}
		pod.Spec.Containers[0].Resources.Claims = nil
		pod.Spec.Containers = append(pod.Spec.Containers, withClaim)
		r := s.runAsTenant(t, claimTemplate("c-unclaimed", pkgQuarter, nil), pod)
		if strings.Contains(r.logs, "device node") || !strings.Contains(r.logs, "cannot load libcuda.so.1") {
			t.Fatalf("the container without the claim reached a GPU:\n%s", r.logs)
		}
		row.detail = "no GPU device node and no driver in the container without the claim"
		s.victimUntouched(t)
	})
}

// sliceHeld checks slice-check's report of an 8 GiB slice that held.
func sliceHeld(t *testing.T, _ *suite, r result) string {
	t.Helper()
	if !strings.Contains(r.logs, fmt.Sprintf(", %d MiB total", sliceMiB)) || !strings.Contains(r.logs, "the slice held") || r.exit != 0 {
		t.Fatalf("slice-check did not see an 8192 MiB slice that held (exit %d):\n%s", r.exit, r.logs)
	}
	return fmt.Sprintf("saw %d MiB total, allocated %d MiB, then refused", sliceMiB, allocated(t, r.logs))
}

// heldOrStopped accepts the slice held by the shim or, where the shim
// never saw the allocations, the process stopped by the enforcer.
func heldOrStopped(t *testing.T, s *suite, r result) string {
	t.Helper()
	if note, ok := s.killed(t, r); ok {
		return "stopped by the enforcer: " + note
	}
	return sliceHeld(t, s, r)
}

// mustBeKilled wants the process past the slice stopped by the enforcer.
func mustBeKilled(t *testing.T, s *suite, r result) string {
	t.Helper()
	note, ok := s.killed(t, r)
	if !ok {
		t.Fatalf("the process past the slice was not stopped (exit %d):\n%s", r.exit, r.logs)
	}
	return "stopped by the enforcer: " + note
}

// killed reports whether the attack's container was SIGKILLed by the
// enforcer, and returns the note of its event.
func (s *suite) killed(t *testing.T, r result) (string, bool) {
	t.Helper()
	if r.exit != killedExit {
		return "", false
	}
	return s.enforcerKill(t, r)
}

// enforcerKill waits for the enforcer's event on the attack's pod and
// checks its claim's kill metric; it returns the event's note.
func (s *suite) enforcerKill(t *testing.T, r result) (string, bool) {
	t.Helper()
	var note string
	ctx := context.Background()
	realnodetest.Eventually(t, time.Minute, "a "+driver.EventReasonMemoryLimitExceeded+" event on pod "+r.pod, func() (bool, string) {
		list, err := s.admin.EventsV1().Events(red).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == driver.EventReasonMemoryLimitExceeded && e.Regarding.Name == r.pod {
				note = e.Note
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	if n := realnodetest.ClaimMetric(realnodetest.Scrape(t, s.env.Nodes[0]), "gpuslice_claim_enforcer_kills_total", r.claimUID); n < 1 {
		t.Fatalf("gpuslice_claim_enforcer_kills_total of claim %s is %v after the kill", r.claimUID, n)
	}
	return note, true
}

// events are the notes of the events on a pod in red, for failure messages.
func (s *suite) events(pod string) string {
	list, err := s.admin.EventsV1().Events(red).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == pod {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return strings.Join(out, "\n")
}

var allocatedLine = regexp.MustCompile(`slice-check: allocated (\d+) MiB`)

// allocated is what slice-check's allocations got before the first refusal.
func allocated(t *testing.T, logs string) int {
	t.Helper()
	m := allocatedLine.FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no allocation report in:\n%s", logs)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
