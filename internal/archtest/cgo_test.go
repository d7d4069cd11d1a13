package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// released are the commands make release ships: built with CGO off for
// every release OS (internal/release), so that they run in any runner
// image, libc or not.
var released = []string{"./cmd/gpuslice", "./cmd/terraform-provider-gpuslice"}

// Every package the released commands link builds without cgo on every
// release OS: a dependency whose files all need cgo (go-nvml is one) would
// leave a package with no Go files, and make release would fail.
func TestReleasedCommandsBuildWithoutCgo(t *testing.T) {
	for _, goos := range []string{"linux", "darwin", "windows"} {
		pkgs, err := listDeps(goos, "0")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			if p.Error != nil {
				t.Errorf("GOOS=%s CGO_ENABLED=0: %s does not build: %s", goos, p.ImportPath, p.Error.Err)
			}
		}
	}
}

// With cgo available, no package outside the standard library that the
// released commands link has cgo files: one with a pure-Go fallback would
// build without cgo but behave differently from the binaries the tests run.
func TestReleasedCommandsLinkNoCgoPackage(t *testing.T) {
	pkgs, err := listDeps(runtime.GOOS, "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		if !p.Standard && len(p.CgoFiles) > 0 {
			t.Errorf("%s has cgo files (%v); the released commands must not link it", p.ImportPath, p.CgoFiles)
		}
	}
}

type depPkg struct {
	ImportPath string
	Standard   bool
	CgoFiles   []string
	Error      *struct{ Err string }
}

func listDeps(goos, cgo string) ([]depPkg, error) {
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", append([]string{"list", "-e", "-deps", "-json=ImportPath,Standard,CgoFiles,Error"}, released...)...)
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED="+cgo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.Join(err, errors.New(stderr.String()))
	}
	var pkgs []depPkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p depPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
}
