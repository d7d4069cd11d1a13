package images_test

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
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

// The reconcile image holds the static CLI and a CA bundle, runs it as
// uid 65532 with the reconcile command, and refuses a cgo build.
func TestReconcileImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuslice")
	// A static Go program stands in for the CLI (its build alone takes
	// minutes on a loaded machine).
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", bin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build a static program: %v\n%s", err, out)
	}
	ca := filepath.Join(dir, "ca.crt")
	copyFile(t, "/etc/ssl/certs/ca-certificates.crt", ca)
	img, err := images.ReconcileImage(dir, ca, "1.2.3", "abc123")
	if err != nil {
		t.Fatal(err)
	}
	if files := layerFiles(t, img); !slices.Equal(files, []string{"etc/ssl/certs/ca-certificates.crt", "usr/local/bin/gpuslice"}) {
		t.Errorf("image files %v, want the CLI and the CA bundle only", files)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/gpuslice", "reconcile"}) {
		t.Errorf("user %q entrypoint %v, want 65532:65532 running gpuslice reconcile", cf.Config.User, cf.Config.Entrypoint)
	}
	copyFile(t, "/bin/true", bin)
	if _, err := images.ReconcileImage(dir, ca, "1", "x"); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("image of a dynamically linked CLI: error %v, want one naming CGO_ENABLED=0", err)
	}
}
