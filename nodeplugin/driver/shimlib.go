package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/internal/atomicfile"
)

// installShim copies the shim library into dir under a name carrying its
// content hash (libgpuslice-<hash>.so) and returns that path. A new plugin
// version installs a new file beside the old one: a file that running
// containers have mapped is never replaced, and an unchanged library is not
// copied again.
func installShim(source, dir string) (string, error) {
	data, err := os.ReadFile(source)
	if err != nil {
		return "", fmt.Errorf("read the shim library %s: %w (build it with `make shim`, or set --shim-library)", source, err)
	}
	sum := sha256.Sum256(data)
	name := fmt.Sprintf("libgpuslice-%s.so", hex.EncodeToString(sum[:6]))
	dest := filepath.Join(dir, name)
	if st, err := os.Stat(dest); err == nil && st.Size() == int64(len(data)) {
		return dest, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create shim dir: %w", err)
	}
	if err := atomicfile.Write(dest, data, 0o755); err != nil {
		return "", fmt.Errorf("install the shim library: %w", err)
	}
	return dest, nil
}

// writePreloadFile writes the ld.so.preload file the CDI specs mount.
func writePreloadFile(stateDir string) (string, error) {
	path := filepath.Join(stateDir, "ld.so.preload")
	if b, err := os.ReadFile(path); err == nil && string(b) == contract.PreloadFileContent {
		return path, nil
	}
	if err := atomicfile.Write(path, []byte(contract.PreloadFileContent), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}
