package provider

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// peakRSS is the most memory this process has held resident (Linux's
// VmHWM), for the debug log beside the request counts: what a plan's
// reads cost in memory, which must not grow with other tenants' objects
// (acctest/tfspeed reads it). 0 where /proc does not say.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kib << 10
		}
	}
	return 0
}
