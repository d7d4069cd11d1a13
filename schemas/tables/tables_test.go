package tables

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuiltinGPUModels(t *testing.T) {
	m, ok := BuiltinGPUModels()["Tesla V100-PCIE-32GB"]
	if !ok || m.MemoryMiB != 32768 || m.ComputeCapability != "7.0" || m.Architecture != "Volta" {
		t.Fatalf("V100-PCIE-32GB row = %+v, %v", m, ok)
	}
}

func TestLoadGPUModelsExtendsAndRejects(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mine.yaml")
	os.WriteFile(good, []byte("version: 1\nmodels:\n  - name: My GPU\n    memory_mib: 1024\n    compute_capability: \"8.6\"\n    architecture: Ampere\n"), 0o644)
	table, err := LoadGPUModels(good)
	if err != nil {
		t.Fatal(err)
	}
	if table["My GPU"].MemoryMiB != 1024 || table["Tesla V100-PCIE-32GB"].MemoryMiB != 32768 {
		t.Fatalf("merged table wrong: %+v", table["My GPU"])
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nmodels:\n  - name: X\n    memory_mb: 3\n"), 0o644)
	if _, err := LoadGPUModels(bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "memory_mb") {
		t.Fatalf("unknown field: err = %v, want the file and field named", err)
	}
	v2 := filepath.Join(dir, "v2.yaml")
	os.WriteFile(v2, []byte("version: 2\nmodels: []\n"), 0o644)
	if _, err := LoadGPUModels(v2); err == nil || !strings.Contains(err.Error(), "version 2 is not supported") {
		t.Fatalf("future version: err = %v", err)
	}
}
