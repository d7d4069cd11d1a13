package realnodetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildCLI builds the gpuslice CLI into a temporary directory, for a test
// package whose stacks reach the nodes the way users apply them; remove
// deletes it.
func BuildCLI() (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "gpuslice-cli-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, "gpuslice")
	if out, err := exec.Command("go", "build", "-o", path, "github.com/gpuslice/gpuslice/cmd/gpuslice").CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("build gpuslice: %v\n%s", err, out)
	}
	return path, remove, nil
}
