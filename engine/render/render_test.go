package render_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/render"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// TestGolden renders each configuration under testdata/configs and compares
// the YAML with testdata/golden/<name>.yaml. Run with -update after an
// intended change and review the diff.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/configs/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no configurations under testdata/configs: %v", err)
	}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			c, diags := hclstack.Load(dir, hclstack.Options{Stack: "golden", VarOptions: hclstack.VarOptions{Env: []string{}}})
			if diags.HasErrors() {
				t.Fatal(diags.Err())
			}
			objs, err := render.Stack(c.Stack)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			for _, o := range objs {
				y, err := yaml.Marshal(o.MustUnstructured().Object)
				if err != nil {
					t.Fatal(err)
				}
				buf.WriteString("# " + o.Address + "\n---\n")
				buf.Write(y)
			}
			golden := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./engine/render -update to create it)", err)
			}
			if got := buf.String(); got != string(want) {
				t.Errorf("rendered objects differ from %s (rerun with -update if intended):\n%s", golden, cmp.Diff(string(want), got))
			}
		})
	}
}
