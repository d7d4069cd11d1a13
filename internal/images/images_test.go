package images_test

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// fakeBuild lays out what `make image` builds, with stand-ins: a dynamically
// linked program as the plugin, a shared library as the shim.
func fakeBuild(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copyFile(t, "/bin/true", filepath.Join(dir, "gpuslice-nodeplugin"))
	libc, err := filepath.EvalSymlinks("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		testenv.Unavailable(t, "no glibc at the Debian path: %v", err)
	}
	copyFile(t, libc, filepath.Join(dir, "shim", "libgpuslice.so"))
	return dir
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// The node plugin's image holds the plugin, the shim and the C library with
// its loader, nothing of the GPU driver, carries the OCI labels, and the
// same inputs give the same digest.
func TestNodePluginImage(t *testing.T) {
	dir := fakeBuild(t)
	img, err := images.NodePluginImage(dir, "1.2.3", "abc123")
	if err != nil {
		t.Fatal(err)
	}
	again, err := images.NodePluginImage(dir, "1.2.3", "abc123")
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same inputs: %s and %s", d1, d2)
	}

	files := layerFiles(t, img)
	for _, want := range []string{"usr/local/bin/gpuslice-nodeplugin", "usr/local/lib/gpuslice/libgpuslice.so", "lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6"} {
		if !slices.Contains(files, want) {
			t.Errorf("image lacks %s: %v", want, files)
		}
	}
	for _, f := range files {
		if strings.Contains(f, "libcuda") || strings.Contains(f, "libnvidia") || strings.HasSuffix(f, "nvidia-smi") {
			t.Errorf("image carries driver file %s: the driver comes from the node", f)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"org.opencontainers.image.version": "1.2.3", "org.opencontainers.image.revision": "abc123", "org.opencontainers.image.source": images.Source} {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	if cf.Created.Unix() != 0 {
		t.Errorf("created %v, want the epoch (reproducible)", cf.Created)
	}
	if _, err := images.NodePluginImage(t.TempDir(), "1", "x"); err == nil || !strings.Contains(err.Error(), "make image") {
		t.Errorf("image without a build: error %v, want one naming `make image`", err)
	}
}

// layerFiles lists the regular files of the image's layers.
func layerFiles(t *testing.T, img v1.Image) []string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	var files []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files = append(files, h.Name)
		}
	}
}
