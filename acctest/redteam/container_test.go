package redteam

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/contract"
)

// Files of red's slice as its container sees them.
var (
	regionFile = contract.ContainerAccountingDir + "/gpuslice.region"
	limitsFile = contract.ContainerAccountingDir + "/gpuslice.limits"
)

// Offsets in the region (include/gpuslice.h): the limit it used to carry,
// the claim's usage and the usage of the first slots.
const (
	offRegionLimit = 24
	offRegionUsed  = 64
	offSlot0Used   = 256 + 16
	slotSize       = 128
	thirtyTwoGiB   = "34359738368"
)

// TestContainer attacks red's 8 GiB slice from inside its own container:
// the files that carry its limits and usage, the environment, the driver
// library, and programs that do not go through the shim. Each must end
// with the slice held (or the process over it stopped) and blue's victim
// untouched.
func TestContainer(t *testing.T) {
	s := setup(t)
	cases := []struct {
		name, script string
		check        func(t *testing.T, logs string, exit int32) string
	}{
		{"region: write the limit, unset the variable, start a new process",
			fmt.Sprintf("tenant-attack poke %s %d %s; unset %s; exec slice-check", regionFile, offRegionLimit, thirtyTwoGiB, contract.EnvMemoryLimit),
			sliceHeld},
		{"limits file: write, chmod, unlink, rename, hard-link it",
			fmt.Sprintf("for v in 'write %[1]s' 'chmod %[1]s 666' 'poke %[1]s 8 %[2]s' 'unlink %[1]s' 'rename %[1]s /run/gpuslice/x' 'link %[1]s /run/gpuslice/y' 'link %[1]s /tmp/y'; do tenant-attack $v; done; exec slice-check",
				limitsFile, thirtyTwoGiB),
			func(t *testing.T, logs string, exit int32) string {
				if n := strings.Count(logs, ": done"); n > 0 {
					t.Fatalf("%d steps on the limits file succeeded:\n%s", n, logs)
				}
				if c := strings.Count(logs, ": refused:"); c != 7 {
					t.Fatalf("want 7 refused steps, saw %d:\n%s", c, logs)
				}
				return "7 of 7 refused; " + sliceHeld(t, logs, exit)
			}},
		{"region: zero the usage while another process holds memory",
			fmt.Sprintf("slice-check --hold 4096 --marker /tmp/held & tenant-attack wait-file /tmp/held 60 && "+
				"for off in %d %d %d %d %d; do tenant-attack poke %s $off 0; done; tenant-attack wait-file /tmp/never 1; slice-check; kill %%1",
				offRegionUsed, offSlot0Used, offSlot0Used+slotSize, offSlot0Used+2*slotSize, offSlot0Used+3*slotSize, regionFile),
			func(t *testing.T, logs string, exit int32) string {
				got := allocated(t, logs)
				if got+4096 > sliceMiB {
					t.Fatalf("after zeroing the usage a second process allocated %d MiB beside the first's 4096: %d MiB on an 8192 MiB slice\n%s", got, got+4096, logs)
				}
				return fmt.Sprintf("the second process got %d MiB beside the first's 4096", got)
			}},
		{"region: delete it and recreate it from a raised variable",
			fmt.Sprintf("tenant-attack unlink %s; %s=%s exec slice-check", regionFile, contract.EnvMemoryLimit, thirtyTwoGiB),
			sliceHeld},
		{"env -i: no limits in the environment",
			"exec tenant-attack exec-clean /usr/local/bin/slice-check",
			sliceHeld},
		{"an accounting directory of its own with a raised limit",
			fmt.Sprintf("tenant-attack mkdir /tmp/acct; %s=/tmp/acct %s=%s exec slice-check", contract.EnvAccountingDir, contract.EnvMemoryLimit, thirtyTwoGiB),
			sliceHeld},
		{"a copy of the driver library loaded by its path",
			"tenant-attack copy /usr/lib/x86_64-linux-gnu/libcuda.so.1 /tmp/libcuda.so.1 && exec slice-check --libcuda /tmp/libcuda.so.1",
			sliceHeld},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := attack(t, "shim", contained)
			name := fmt.Sprintf("c-%d", i)
			logs, exit := s.runAsTenant(t, claimTemplate(name, pkgQuarter, nil), attackPod(name, name, c.script))
			r.detail = c.check(t, logs, exit)
			s.victimUntouched(t)
		})
	}

	t.Run("a second container of the pod without the claim", func(t *testing.T) {
		r := attack(t, "kubelet, CDI", contained)
		pod := attackPod("c-unclaimed", "c-unclaimed", "slice-check --devices")
		withClaim := pod.Spec.Containers[0]
		withClaim.Name, withClaim.Command = "with-claim", []string{"sh", "-c", "exit 0"}
		pod.Spec.Containers[0].Resources.Claims = nil
		pod.Spec.Containers = append(pod.Spec.Containers, withClaim)
		logs, _ := s.runAsTenant(t, claimTemplate("c-unclaimed", pkgQuarter, nil), pod)
		if strings.Contains(logs, "device node") || !strings.Contains(logs, "cannot load libcuda.so.1") {
			t.Fatalf("the container without the claim reached a GPU:\n%s", logs)
		}
		r.detail = "no GPU device node and no driver in the container without the claim"
		s.victimUntouched(t)
	})
}

// sliceHeld checks slice-check's report of an 8 GiB slice that held.
func sliceHeld(t *testing.T, logs string, exit int32) string {
	t.Helper()
	if !strings.Contains(logs, fmt.Sprintf(", %d MiB total", sliceMiB)) || !strings.Contains(logs, "the slice held") || exit != 0 {
		t.Fatalf("slice-check did not see an 8192 MiB slice that held (exit %d):\n%s", exit, logs)
	}
	return fmt.Sprintf("saw %d MiB total, %d MiB allocated, then refused", sliceMiB, allocated(t, logs))
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
