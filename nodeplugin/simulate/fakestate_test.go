package simulate

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The simulated NVML reads the fake driver's state file at the offsets the
// fake lays it out with.
func TestFakeStateLayoutMatchesHeader(t *testing.T) {
	src, err := os.ReadFile("../shim/fake/fakegpu.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]uint64{}
	for _, m := range regexp.MustCompile(`(?m)^#define (FAKE_\w+) (0x[0-9a-f]+|\d+)(?:ull)?\b`).FindAllStringSubmatch(string(src), -1) {
		v, err := strconv.ParseUint(m[2], 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		defs[m[1]] = v
	}
	for name, want := range map[string]uint64{
		"FAKE_MAGIC": fakeMagic, "FAKE_OFF_MEM_USED": fakeOffMemUsed, "FAKE_OFF_PROCS": fakeOffProcs,
		"FAKE_PROC_SIZE": fakeProcSize, "FAKE_PROCS": fakeProcs,
	} {
		if got, ok := defs[name]; !ok || got != want {
			t.Errorf("%s: fakegpu.h says %d (defined: %v), the reader uses %d", name, got, ok, want)
		}
	}
	for field, off := range map[string]int{"state": fpState, "pid": fpPID, "pidns": fpPIDNS, "start": fpStart, "used": fpUsed} {
		if !regexp.MustCompile(`\b` + field + `; +/\* +` + strconv.Itoa(off) + ` `).Match(src) {
			t.Errorf("struct fake_proc's %s is not at offset %d in fakegpu.h", field, off)
		}
	}
	for name, want := range map[string]int{"FAKE_PROC_FREE": fakeProcFree, "FAKE_PROC_BUSY": fakeProcBusy, "FAKE_PROC_LIVE": fakeProcLive} {
		if !regexp.MustCompile(name + ` = ` + strconv.Itoa(want) + `\b`).Match(src) {
			t.Errorf("%s is not %d in fakegpu.h", name, want)
		}
	}
}
