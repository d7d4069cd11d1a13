// Package images builds OCI images in Go, without Docker: the local
// cluster's pod sandbox (pause) and slice-check test image. Images are
// reproducible: every timestamp is the Unix epoch and files are laid out in
// a fixed order, so the same inputs give the same digest.
package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gpuslice/gpuslice/internal/localregistry"
)

// References of the images the local cluster serves.
const (
	Pause      = localregistry.Host + "/pause:3.10"
	SliceCheck = localregistry.Host + "/slice-check:1"
)

// File is one file of a layer: its path in the image and where its content
// comes from on this machine.
type File struct {
	Path   string // absolute, in the image
	Source string // on this machine
	Mode   int64
}

// epoch is every timestamp in a built image.
var epoch = time.Unix(0, 0).UTC()

// Layer builds one uncompressed-reproducible layer from files, adding their
// parent directories.
func Layer(files []File) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		var parents []string
		for d := path.Dir(f.Path); d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: parents[i][1:] + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, fmt.Errorf("image file %s: %w", f.Path, err)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.Path[1:], Mode: f.Mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	content := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(content)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// Build makes a linux/amd64 OCI image of layers with the given config.
func Build(cfg v1.Config, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = cfg
	cf.Created = v1.Time{Time: epoch}
	for i := range cf.History {
		cf.History[i].Created = v1.Time{Time: epoch}
	}
	return mutate.ConfigFile(img, cf)
}

// PauseImage is the pod sandbox: bin/images/pause (make build).
func PauseImage(binDir string) (v1.Image, error) {
	layer, err := Layer([]File{{Path: "/pause", Source: filepath.Join(binDir, "images", "pause"), Mode: 0o755}})
	if err != nil {
		return nil, needBuild(err)
	}
	return Build(v1.Config{Entrypoint: []string{"/pause"}}, layer)
}

// SliceCheckImage holds slice-check and a shell, dynamically linked against
// this machine's C library, which the image carries with its loader: a
// dynamically linked program is what /etc/ld.so.preload (the shim) needs.
// It also holds slice-attack, statically linked: what a tenant tries around
// the shim (slicecheck/slice-attack.c).
// The GPU driver (libcuda, libnvidia-ml, nvidia-smi) is not in the image:
// the node plugin mounts it from the node, as on any GPU node.
func SliceCheckImage(binDir string) (v1.Image, error) {
	files := []File{
		{Path: "/usr/local/bin/slice-check", Source: filepath.Join(binDir, "images", "slice-check"), Mode: 0o755},
		{Path: "/bin/sh", Source: "/bin/sh", Mode: 0o755},
	}
	libs, err := sharedLibraries([]string{files[0].Source, files[1].Source,
		// what the node mounts in needs the same C library
		filepath.Join(binDir, "shim", "libgpuslice.so"), filepath.Join(binDir, "shim", "fake", "libcuda.so.1"), filepath.Join(binDir, "shim", "gpuslice-smi")})
	if err != nil {
		return nil, needBuild(err)
	}
	files = append(files, libs...)
	files = append(files, File{Path: "/usr/local/bin/slice-attack", Source: filepath.Join(binDir, "images", "slice-attack"), Mode: 0o755})
	layer, err := Layer(files)
	if err != nil {
		return nil, needBuild(err)
	}
	return Build(v1.Config{
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Entrypoint: []string{"/usr/local/bin/slice-check"},
	}, layer)
}

func needBuild(err error) error { return missing(err, "make build") }

// missing says which target builds a file an image needs.
func missing(err error, target string) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: run `%s`", err, target)
	}
	return err
}

// libraryDirs are where the dynamic loader of this machine finds libraries.
var libraryDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// sharedLibraries lists the loader and every library the programs need,
// transitively, at the paths this machine has them.
func sharedLibraries(programs []string) ([]File, error) {
	seen := map[string]bool{}
	var out []File
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, File{Path: p, Source: p, Mode: 0o755})
		}
	}
	queue := append([]string(nil), programs...)
	for len(queue) > 0 {
		prog := queue[0]
		queue = queue[1:]
		f, err := elf.Open(prog)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", prog, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				interp, _ := io.ReadAll(p.Open())
				add(string(bytes.TrimRight(interp, "\x00")))
			}
		}
		needed, err := f.ImportedLibraries()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", prog, err)
		}
		for _, lib := range needed {
			found := ""
			for _, d := range libraryDirs {
				if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
					found = filepath.Join(d, lib)
					break
				}
			}
			if found == "" {
				// The driver's own libraries come from the node.
				if lib == "libcuda.so.1" || lib == "libnvidia-ml.so.1" {
					continue
				}
				return nil, fmt.Errorf("%s needs %s, not found in %v", prog, lib, libraryDirs)
			}
			resolved, err := filepath.EvalSymlinks(found)
			if err != nil {
				return nil, err
			}
			if !seen[found] {
				// The library under the name programs ask for, with the
				// content of the file the link points to.
				seen[found] = true
				out = append(out, File{Path: found, Source: resolved, Mode: 0o755})
				queue = append(queue, resolved)
			}
		}
	}
	return out, nil
}
