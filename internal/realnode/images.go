package realnode

import (
	"context"
	"fmt"

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
