package realnode

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A bind mount needs its target to exist, so the host paths nodes shadow are
// created when missing. Which ones this code created is recorded in the
// registry, so that the last node out removes exactly those (and only while
// empty: a real kubelet or containerd on the machine keeps its own).
func createdPathsFile() string { return filepath.Join(registryDir, "created-host-paths") }

// ensureHostPaths creates missing directories; call with the registry locked.
func ensureHostPaths(paths []string) error {
	created := readCreated()
	for _, p := range paths {
		var missing []string
		for dir := p; dir != "/"; dir = filepath.Dir(dir) {
			if _, err := os.Stat(dir); err == nil {
				break
			}
			missing = append(missing, dir)
		}
		for i := len(missing) - 1; i >= 0; i-- {
			if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			created = append(created, missing[i])
		}
	}
	return os.WriteFile(createdPathsFile(), []byte(strings.Join(created, "\n")), 0o600)
}

func readCreated() []string {
	data, err := os.ReadFile(createdPathsFile())
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// removeShadowedPaths removes what ensureHostPaths created, deepest first;
// call with the registry locked and no node left.
func removeShadowedPaths() {
	created := readCreated()
	for i := len(created) - 1; i >= 0; i-- {
		_ = syscall.Rmdir(created[i])
	}
	_ = os.Remove(createdPathsFile())
}
