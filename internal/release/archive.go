package release

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// zipTime is every zip entry's modification time: the zip format's epoch,
// so that a package's bytes do not depend on when it was built.
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// writeZip writes a zip at path holding the file src as name, executable.
func writeZip(path, name, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(out)
	hdr := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: zipTime}
	hdr.SetMode(0o755)
	w, err := zw.CreateHeader(hdr)
	if err == nil {
		_, err = io.Copy(w, in)
	}
	if err == nil {
		err = zw.Close()
	}
	if closeErr := out.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// fileSHA256 is the hex SHA-256 of a file's bytes.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeSums writes dir/sums in sha256sum's format, one line per file of
// dir named in files, sorted by name as the registries' tools write it.
func writeSums(dir, sums string, files []string) error {
	files = slices.Sorted(slices.Values(files))
	var b strings.Builder
	for _, name := range files {
		sum, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, name)
	}
	return os.WriteFile(filepath.Join(dir, sums), []byte(b.String()), 0o644)
}

// ReadSums reads a sums file into file name → hex SHA-256.
func ReadSums(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("%s line %d: want \"<sha256>  <file>\", got %q", path, i+1, line)
		}
		out[name] = sum
	}
	return out, nil
}
