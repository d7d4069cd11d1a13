package tfspeed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// The commands measured run under ./peakrss, which reports their peak RSS
// as the kernel counts it: the rusage this process's own wait returns
// would include this process's peak, recorded into each command it starts
// (see peakrss's comment).

var (
	// scratch holds the peakrss binary and its reports; TestMain removes it.
	scratch string
	peakRSS struct {
		once sync.Once
		path string
		err  error
	}
	reports atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tfspeed-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratch = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// peakRSSTool builds ./peakrss once per test process.
func peakRSSTool(b testing.TB) string {
	b.Helper()
	peakRSS.once.Do(func() {
		peakRSS.path = filepath.Join(scratch, "peakrss")
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", peakRSS.path, "./peakrss")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			peakRSS.err = fmt.Errorf("build peakrss: %v\n%s", err, out)
		}
	})
	if peakRSS.err != nil {
		b.Fatal(peakRSS.err)
	}
	return peakRSS.path
}

// newReport names a file for one command's report.
func newReport() string {
	return filepath.Join(scratch, "rss-"+strconv.FormatInt(reports.Add(1), 10))
}

// readReport returns the peak RSS a report holds, in bytes.
func readReport(b testing.TB, path string) int64 {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("read peakrss's report: %v", err)
	}
	os.Remove(path)
	n, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		b.Fatalf("peakrss's report %q: %v", data, err)
	}
	return n
}
