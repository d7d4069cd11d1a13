package atomicfile_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/internal/atomicfile"
)

func noTemporaries(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".tmp" {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestWriteCreatesAndReplaces(t *testing.T) {
	for name, write := range map[string]func(string, []byte, os.FileMode) error{
		"Write": atomicfile.Write, "WriteNoSync": atomicfile.WriteNoSync,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := write(path, []byte("one"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := write(path, []byte("two"), 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "two" {
				t.Fatalf("read %q, %v; want \"two\"", got, err)
			}
			st, _ := os.Stat(path)
			if st.Mode().Perm() != 0o755 {
				t.Errorf("mode %v, want 0755 (the mode of the last write, whatever the umask)", st.Mode().Perm())
			}
			noTemporaries(t, dir)
		})
	}
}

// TestFailureKeepsTheOldFile: a write that cannot complete leaves the target
// as it was and no temporary file.
func TestFailureKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	// a rename cannot replace a non-empty directory
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(target, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(target, []byte("new"), 0o644); err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	if st, err := os.Stat(filepath.Join(target, "inside")); err != nil || !st.IsDir() {
		t.Errorf("the old target changed: %v", err)
	}
	noTemporaries(t, dir)

	if err := atomicfile.Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}

// TestReadersSeeWholeContents: a reader racing the writer reads one version
// or the other, never a mix or an empty file.
func TestReadersSeeWholeContents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	a, b := bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<19)
	if err := atomicfile.WriteNoSync(path, a, 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := os.ReadFile(path)
			if err != nil || (!bytes.Equal(got, a) && !bytes.Equal(got, b)) {
				t.Errorf("reader saw %d bytes (err %v): neither version", len(got), err)
				return
			}
		}
	}()
	for i := range 50 {
		data := a
		if i%2 == 0 {
			data = b
		}
		if err := atomicfile.WriteNoSync(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
