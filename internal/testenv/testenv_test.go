package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every skip in the module goes through this package, so that one for a
// missing prerequisite cannot pass CI by skipping: no other file calls
// Skip, Skipf or SkipNow.
func TestSkipsGoThroughTestenv(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not two folders up: %v", err)
	}
	self := filepath.Join(root, "internal", "testenv")
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata" || name == "node_modules" || path == self) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module (tools/devtools)
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Skip", "Skipf", "SkipNow":
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d calls %s directly: skip through internal/testenv (Unavailable for what the machine lacks, which fails under CI=true; Short or Chosen for what the person running left out)",
						rel, fset.Position(call.Pos()).Line, sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d Go files under %s", files, root)
	}
}

// Unavailable skips on a developer's machine and fails under CI=true;
// Short and Chosen skip under CI=true too. Each runs in a child test
// binary, as go test would run it.
func TestUnavailableFailsOnlyInCI(t *testing.T) {
	for _, tc := range []struct {
		helper, ci string
		fails      bool
		says       string
	}{
		{"unavailable", "", false, "--- SKIP"},
		{"unavailable", "true", true, "CI=true: a test that cannot run here fails instead of skipping"},
		{"short", "true", false, "slow; run without -short"},
		{"chosen", "true", false, "--- SKIP"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelper$", "-test.v", "-test.short")
		cmd.Env = append(os.Environ(), "GPUSLICE_TESTENV_HELPER="+tc.helper, "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fails || !strings.Contains(string(out), tc.says) {
			t.Errorf("%s with CI=%q: %v, want failed=%v saying %q:\n%s", tc.helper, tc.ci, err, tc.fails, tc.says, out)
		}
	}
}

func TestHelper(t *testing.T) {
	switch os.Getenv("GPUSLICE_TESTENV_HELPER") {
	case "unavailable":
		Unavailable(t, "no %s on this machine", "gcc")
	case "short":
		Short(t, "slow")
	case "chosen":
		Chosen(t, "not on your cluster")
	default:
		return // run as a test of its own: nothing to do
	}
	t.Error("did not stop")
}
