package providerschema_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gpuslice/gpuslice/internal/testenv"
	providerschema "github.com/gpuslice/gpuslice/schemas/provider"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

var (
	dumpOnce sync.Once
	dumped   []byte
	dumpErr  error
)

// current is the provider's schema as bin/tofu reports it, read once.
func current(t *testing.T) []byte {
	t.Helper()
	testenv.Short(t, "builds the provider and runs bin/tofu")
	tofu := filepath.Join(repoRoot(), "bin", "tofu")
	if _, err := os.Stat(tofu); err != nil {
		testenv.Unavailable(t, "%s not built (run make tools)", tofu)
	}
	dumpOnce.Do(func() { dumped, dumpErr = providerschema.Dump(context.Background(), repoRoot(), tofu) })
	if dumpErr != nil {
		t.Fatal(dumpErr)
	}
	return dumped
}

// The checked-in snapshot must be the schema the code has: a breaking
// change is named, and passes only with the snapshot updated in the same
// change (make schema).
func TestSnapshotCurrent(t *testing.T) {
	now := current(t)
	snapshot, err := os.ReadFile(filepath.Join(repoRoot(), providerschema.SnapshotFile))
	if err != nil {
		t.Fatalf("read the snapshot: %v (run make schema)", err)
	}
	if bytes.Equal(now, snapshot) {
		return
	}
	breaking, err := providerschema.Breaking(snapshot, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(breaking) > 0 {
		t.Fatalf("breaking provider schema changes against %s:\n  %s\nExisting configurations or state break. If that is intended, run make schema and commit the snapshot with the change (and say so in the changelog).",
			providerschema.SnapshotFile, strings.Join(breaking, "\n  "))
	}
	t.Fatalf("the provider schema changed (compatibly) but %s is stale: run make schema and commit it", providerschema.SnapshotFile)
}

// docs/ must be what tfplugindocs generates from templates/, examples/ and
// the schema now.
func TestDocsCurrent(t *testing.T) {
	now := current(t)
	root := repoRoot()
	tfplugindocs := filepath.Join(root, "bin", "tfplugindocs")
	if _, err := os.Stat(tfplugindocs); err != nil {
		testenv.Unavailable(t, "%s not built (run make tools)", tfplugindocs)
	}
	tmp := t.TempDir()
	for _, dir := range []string{"examples", "templates"} {
		if _, err := os.Stat(filepath.Join(root, dir)); err == nil {
			if err := os.CopyFS(filepath.Join(tmp, dir), os.DirFS(filepath.Join(root, dir))); err != nil {
				t.Fatal(err)
			}
		}
	}
	input, err := providerschema.ForDocs(now)
	if err != nil {
		t.Fatal(err)
	}
	schemaFile := filepath.Join(tmp, "schema.json")
	if err := os.WriteFile(schemaFile, input, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tfplugindocs, "generate", "--provider-dir", tmp, "--providers-schema", schemaFile,
		"--provider-name", "gpuslice", "--rendered-provider-name", "gpuslice")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tfplugindocs generate: %v\n%s", err, out)
	}
	want, got := readTree(t, filepath.Join(tmp, "docs")), readTree(t, filepath.Join(root, "docs"))
	for name, content := range want {
		if got[name] != content {
			t.Errorf("docs/%s is stale: run make docs and commit docs/", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/%s is no longer generated: run make docs (it removes it) and commit docs/", name)
		}
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return out
}
