package realnode

import (
	"context"
	"fmt"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/localregistry"
)

// PushImages builds the images real nodes and their tests need (the pod
// sandbox and slice-check) from binDir and pushes them to reg.
func PushImages(ctx context.Context, reg *localregistry.Registry, binDir string) error {
	for ref, build := range map[string]func(string) (v1.Image, error){
		images.Pause:      images.PauseImage,
		images.SliceCheck: images.SliceCheckImage,
	} {
		img, err := build(binDir)
		if err != nil {
			return fmt.Errorf("build %s: %w", ref, err)
		}
		if _, err := reg.Push(ctx, ref, img); err != nil {
			return err
		}
	}
	return nil
}

// PushNodePluginImage pushes the node plugin's image, built by `make image`
// into binDir/image, to reg as version (its tag and label: two versions
// have two digests) and returns its reference by tag and digest.
func PushNodePluginImage(ctx context.Context, reg *localregistry.Registry, binDir, version string) (string, error) {
	img, err := images.NodePluginImage(filepath.Join(binDir, "image"), version, "local")
	if err != nil {
		return "", err
	}
	return pushNodePlugin(ctx, reg, img, version)
}

// PushBuiltNodePluginImage pushes the image `make image` built
// (binDir/image/oci) to reg unchanged, as version, and returns its
// reference by tag and digest: the digest `make image` printed.
func PushBuiltNodePluginImage(ctx context.Context, reg *localregistry.Registry, binDir, version string) (string, error) {
	img, err := images.BuiltNodePluginImage(filepath.Join(binDir, "image", "oci"))
	if err != nil {
		return "", err
	}
	return pushNodePlugin(ctx, reg, img, version)
}

func pushNodePlugin(ctx context.Context, reg *localregistry.Registry, img v1.Image, version string) (string, error) {
	ref := localregistry.Host + "/" + images.NodePluginRepository + ":" + version
	digest, err := reg.Push(ctx, ref, img)
	if err != nil {
		return "", err
	}
	return ref + "@" + digest.String(), nil
}
