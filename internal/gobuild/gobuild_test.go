package gobuild_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/internal/gobuild"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// root is the repository's root: go test runs in the package's folder.
const root = "../.."

func goCommand(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(tb, "the build checks need the go command: %v", err)
	}
	return path
}

// A cold build of go-nvml with the flags prints nothing: no deprecation
// warning of gcc's reaches the person building.
func TestGoNVMLBuildsQuietly(t *testing.T) {
	testenv.Short(t, "a cold build of go-nvml and the standard library takes half a minute")
	cmd := exec.Command(goCommand(t), "build", "github.com/NVIDIA/go-nvml/pkg/nvml")
	cmd.Dir = root
	cmd.Env = append(gobuild.Env(), "GOCACHE="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build go-nvml: %v\n%s", err, out)
	}
	if len(out) > 0 {
		t.Errorf("a cold build of go-nvml with CGO_CFLAGS=%q printed:\n%s", gobuild.NVMLCgoCFlags(), out)
	}
}

// The GNUmakefile's go commands that compile go-nvml run with the flags of
// nvml-cgo-cflags: the binaries make demo builds, the image's, vet and the
// tests.
func TestMakefileBuildsGoNVMLWithTheFlags(t *testing.T) {
	goCommand(t)
	if _, err := exec.LookPath("make"); err != nil {
		testenv.Unavailable(t, "reading the GNUmakefile's commands needs make: %v", err)
	}
	cmd := exec.Command("make", "-n", "--no-print-directory", "build", "image", "vet", "unit")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n: %v\n%s", err, out)
	}
	quiet := "CGO_CFLAGS='" + gobuild.NVMLCgoCFlags() + "' "
	for _, marker := range []string{"go build -o " + filepath.Join(abs(t), "bin", "gpuslice-dev"), "go build -o " + filepath.Join(abs(t), "bin", "gpuslice-nodeplugin"),
		"go build -trimpath -buildvcs=false -ldflags \"-s -w\" -o " + filepath.Join(abs(t), "bin", "image", "gpuslice-nodeplugin"),
		"go vet ./...", "go test -short -count=1 ./..."} {
		i := slices.IndexFunc(strings.Split(string(out), "\n"), func(l string) bool { return strings.Contains(l, marker) })
		if i < 0 {
			t.Errorf("make -n runs no %q:\n%s", marker, out)
			continue
		}
		if line := strings.Split(string(out), "\n")[i]; !strings.Contains(line, quiet+marker) {
			t.Errorf("the GNUmakefile runs %q without %s", line, quiet)
		}
	}
}

func abs(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// The flags reach only go-nvml: in every build of the module the other
// cgo packages are the standard library's. A new cgo dependency would have
// its deprecation warnings silenced too: scope the flags before adding it.
func TestFlagsReachOnlyGoNVML(t *testing.T) {
	cmd := exec.Command(goCommand(t), "list", "-deps", "-test", "-f", "{{if and .CgoFiles (not .Standard)}}{{.ImportPath}}{{end}}", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "github.com/NVIDIA/go-nvml/") {
			t.Errorf("%s is a cgo package beside go-nvml: the GNUmakefile's CGO_CFLAGS for go-nvml (internal/gobuild) would hide its deprecation warnings too", p)
		}
	}
}
