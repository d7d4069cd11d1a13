package daemonset

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpuslice/gpuslice/acctest/previous"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// pushPreviousNodePlugin pushes the node plugin image of the previous
// release to the nodes' registry as version and returns its reference by
// tag and digest. The image is built as `make image` builds one, from that
// release's sources (its plugin with go, its shim with gcc), packed by
// this tree's image builder, which has not changed since.
func pushPreviousNodePlugin(t *testing.T, env *realnodetest.Env, version string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Unavailable(t, "building the previous release's shim needs gcc: %v", err)
	}
	dir := previous.Built(t, env.BinDir, "node-plugin", func(src, out string) error {
		image := filepath.Join(out, "image")
		if err := os.MkdirAll(filepath.Join(image, "shim"), 0o755); err != nil {
			return err
		}
		if err := previous.Run(src, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", filepath.Join(image, "gpuslice-nodeplugin"), "./cmd/gpuslice-nodeplugin"); err != nil {
			return err
		}
		return previous.Run(src, "make", "-s", "-C", filepath.Join(src, "nodeplugin", "shim"), "lib", "OUT="+filepath.Join(image, "shim"), "CFLAGS=-O2 -ffile-prefix-map="+src+"=.")
	})
	ref, err := realnode.PushNodePluginImage(context.Background(), env.Registry, dir, version)
	if err != nil {
		t.Fatalf("push the previous release's node plugin (built in %s; remove it to build it again): %v", dir, err)
	}
	return ref
}
