package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Binaries the control plane runs. They are built from pinned Go modules by
// `make tools` (tools/build.sh) into the repository's bin/ folder.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeScheduler         = "kube-scheduler"
	KubeControllerManager = "kube-controller-manager"
	Tofu                  = "tofu"
)

// BinDirEnv overrides where the tool binaries are looked up.
const BinDirEnv = "GPUSLICE_BIN_DIR"

// ErrToolMissing is returned (wrapped) when a binary has not been built yet.
var ErrToolMissing = errors.New("tool not built")

// FindBinDir returns the folder holding the tool binaries: $GPUSLICE_BIN_DIR,
// else the bin/ folder of the repository containing the working directory,
// else the folder of the running executable (`make build` puts gpuslice
// next to the tools).
func FindBinDir() string {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if fileExists(filepath.Join(dir, "go.mod")) && fileExists(filepath.Join(dir, "tools", "build.sh")) {
				return filepath.Join(dir, "bin")
			}
			if parent := filepath.Dir(dir); parent == dir {
				break
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		return filepath.Dir(exe)
	}
	return "bin"
}

// ToolPath returns the path of a built tool, or an error saying how to build
// it.
func ToolPath(binDir, name string) (string, error) {
	path := filepath.Join(binDir, name)
	info, err := os.Stat(path)
	if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s not found in %s: run `make tools` in the gpuslice repository (or set %s to the folder holding it)", ErrToolMissing, name, binDir, BinDirEnv)
	}
	return path, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
