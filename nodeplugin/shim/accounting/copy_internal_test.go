package accounting

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A process of the claim truncates its region while the plugin reads it:
// the read fails; the plugin goes on.
func TestCopyOfTruncatedRegion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	if err := os.WriteFile(path, Encode(8<<30, 25, false, 100*time.Millisecond, time.Now()), 0o666); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, RegionSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if b, err := copyMapped(m); err != nil || len(b) != RegionSize {
		t.Fatalf("intact region: %d bytes, %v", len(b), err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := copyMapped(m); err == nil {
		t.Error("a region truncated under the mapping was read without an error")
	}
}
