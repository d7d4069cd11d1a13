package tfspeed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// rssReport is what peakrss reports of one command, in bytes: its peak
// RSS, and the largest anonymous and file-backed (for a static binary:
// its own pages) resident memory of its own process.
type rssReport struct{ peak, anon, file int64 }

// readReport reads and removes a report.
func readReport(b testing.TB, path string) rssReport {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("read peakrss's report: %v", err)
	}
	os.Remove(path)
	var r rssReport
	fields := map[string]*int64{"peak": &r.peak, "anon": &r.anon, "file": &r.file}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		key, value, _ := strings.Cut(line, " ")
		field, ok := fields[key]
		if !ok {
			b.Fatalf("peakrss's report %q: unknown line %q", data, line)
		}
		if *field, err = strconv.ParseInt(value, 10, 64); err != nil {
			b.Fatalf("peakrss's report %q: %v", data, err)
		}
		delete(fields, key)
	}
	if len(fields) > 0 {
		b.Fatalf("peakrss's report %q lacks a line", data)
	}
	return r
}
