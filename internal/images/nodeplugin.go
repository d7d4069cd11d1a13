package images

import (
	"fmt"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/gpuslice/gpuslice/contract"
)

// NodePluginRepository is the node plugin image's name (without registry):
// push it where your nodes pull from (make image-push IMAGE=…).
const NodePluginRepository = "gpuslice/gpuslice-nodeplugin"

// Source is where the image's sources live (org.opencontainers.image.source).
const Source = "https://github.com/gpuslice/gpuslice"

// NodePluginImage is what the node plugin's DaemonSet runs: the plugin and
// the shim library, and the C library the plugin (cgo, for NVML) is linked
// against — nothing of the GPU driver, which the plugin loads from the
// node's driver root at run time. dir holds what `make image` built:
// gpuslice-nodeplugin and shim/libgpuslice.so.
func NodePluginImage(dir, version, revision string) (v1.Image, error) {
	files := []File{
		{Path: "/usr/local/bin/gpuslice-nodeplugin", Source: filepath.Join(dir, "gpuslice-nodeplugin"), Mode: 0o755},
		{Path: contract.ContainerLibraryPath, Source: filepath.Join(dir, "shim", "libgpuslice.so"), Mode: 0o755},
	}
	libs, err := sharedLibraries([]string{files[0].Source, files[1].Source})
	if err != nil {
		return nil, missing(err, "make image")
	}
	layer, err := Layer(append(files, libs...))
	if err != nil {
		return nil, missing(err, "make image")
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "gpuslice-nodeplugin",
		"org.opencontainers.image.description": "gpuslice's DRA kubelet plugin and in-container enforcement library",
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
	}
	img, err := Build(v1.Config{
		Entrypoint: []string{"/usr/local/bin/gpuslice-nodeplugin"},
		Labels:     labels,
	}, layer)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// BuiltNodePluginImage reads the image `make image` wrote as an OCI layout
// into dir (bin/image/oci): the artifact itself, so what is pushed has the
// digest the build printed.
func BuiltNodePluginImage(dir string) (v1.Image, error) { return Built(dir, "the node plugin's image") }

// Built reads the one image (what, in messages) `make image` wrote as an
// OCI layout into dir.
func Built(dir, what string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w (run `make image` first)", what, dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w (run `make image` again)", what, dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d images, want 1: run `make image` again", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}
