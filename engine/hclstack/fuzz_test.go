package hclstack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuslice/gpuslice/engine/diag"
)

// FuzzLoad feeds arbitrary bytes to the HCL front end as a .tf file. It
// must never panic, and every error it reports must say where: a file
// position, or the resource attribute at fault. The seed corpus
// (testdata/fuzz/FuzzLoad plus the configurations the engine is tested
// with) runs with every plain go test; go test -fuzz FuzzLoad explores.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("../render/testdata/configs/*/main.tf")
	seeds = append(seeds, "testdata/good/main.tf")
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		c, diags := Load(dir, Options{Stack: "fuzz", VarOptions: VarOptions{Env: []string{}}})
		for _, d := range diags {
			if d.Severity == diag.Error && !locates(d) {
				t.Errorf("error says neither file:line nor attribute: %v", d)
			}
		}
		if !diags.HasErrors() && (c == nil || c.Stack == nil) {
			t.Errorf("no errors but no stack")
		}
	})
}

// locates reports whether a diagnostic points at a place in the files or
// at a resource attribute.
func locates(d diag.Diagnostic) bool {
	return (d.Range != nil && d.Range.Filename != "" && d.Range.Line > 0) || (d.Address != "" && d.Attribute != "")
}
