//go:build linux

package accounting_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// A tenant may replace the region (its directory is writable in the
// container) by a symlink or a FIFO before the plugin restarts. The plugin
// runs on the host: following the symlink would create, chmod 0666 or read
// a host file, and opening the FIFO would block its metrics for good. Every
// reader and writer of a claim's files refuses both and leaves the target
// alone.
func TestClaimFilesTakenForWhatTheyAre(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "host-secret")
	if err := os.WriteFile(host, []byte("root:x:0:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(host, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	limits := accounting.Limits{MemoryLimit: 8 << 30, ComputeShare: 25, ComputeWindow: 100 * time.Millisecond,
		SamplePeriod: 200 * time.Millisecond, ContextOverhead: 300 << 20, Created: time.Now()}
	for _, path := range []string{link, fifo} {
		done := make(chan map[string]error, 1)
		go func() {
			errs := map[string]error{
				"Create":      accounting.Create(path, 8<<30, 25, false, 100*time.Millisecond),
				"WriteLimits": accounting.WriteLimits(path, limits),
			}
			_, errs["ReadFile"] = accounting.ReadFile(path)
			_, errs["ReadLimits"] = accounting.ReadLimits(path)
			_, errs["OpenObserver"] = accounting.OpenObserver(path)
			done <- errs
		}()
		var errs map[string]error
		select {
		case errs = <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: a reader or writer blocked on it", filepath.Base(path))
			continue
		}
		for name, err := range errs {
			if !errors.Is(err, accounting.ErrNotRegularFile) {
				t.Errorf("%s on %s: %v, want %v", name, filepath.Base(path), err, accounting.ErrNotRegularFile)
			}
		}
	}
	st, err := os.Stat(host)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(host)
	if st.Mode().Perm() != 0o600 || string(b) != "root:x:0:0" {
		t.Errorf("the symlink's target changed: mode %v, content %q", st.Mode().Perm(), b)
	}
}
