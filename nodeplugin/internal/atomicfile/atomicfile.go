// Package atomicfile replaces files so that a reader, or the node after a
// crash, sees either the old content or the new one, never a mix: the new
// content goes to a temporary file in the same directory (a rename is atomic
// only within one filesystem), which is then renamed over the target.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data and perm, durably: once it returns, the new
// content survives a power loss (the file is synced before the rename, and
// the directory after it, so the rename itself is on disk too).
func Write(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, true)
}

// WriteNoSync replaces path atomically but leaves flushing to the kernel:
// the new content survives the process dying, and after a power loss the
// file holds the old content or the new one. For records whose loss a
// restart tolerates, it saves two disk flushes.
func WriteNoSync(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false)
}

func write(path string, data []byte, perm fs.FileMode, durable bool) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("create a temporary file beside %s (its directory must exist and be writable): %w", path, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := fill(tmp, data, perm, durable); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if durable {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

func fill(tmp *os.File, data []byte, perm fs.FileMode, durable bool) error {
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s (is the filesystem full?): %w", tmp.Name(), err)
	}
	// CreateTemp makes 0600 files; Chmod, unlike the mode of open(2), is not
	// narrowed by the umask
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("set the mode of %s: %w", tmp.Name(), err)
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", tmp.Name(), err)
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
