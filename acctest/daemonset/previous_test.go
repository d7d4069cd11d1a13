package daemonset

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// previousRelease is the last node plugin before checkpoint formats were
// chosen per checkpoint (742b976): it writes format v2 whatever it holds,
// and stops on a format it does not know instead of rebuilding. The
// rollback tests run it as the release users roll back to.
const previousRelease = "c32b7248f4af24c8c6a032503ca3e39b80d53170"

// pushPreviousNodePlugin pushes the node plugin image of previousRelease
// to the nodes' registry as version and returns its reference by tag and
// digest. The image is built as `make image` builds one, from that
// commit's sources (its plugin with go, its shim with gcc), packed by this
// tree's image builder, which has not changed since; the build is cached
// under bin/previous/<commit>, so only the first run pays for it.
func pushPreviousNodePlugin(t *testing.T, env *realnodetest.Env, version string) string {
	t.Helper()
	dir := filepath.Join(env.BinDir, "previous", previousRelease)
	if _, err := os.Stat(filepath.Join(dir, "image", "shim", "libgpuslice.so")); errors.Is(err, fs.ErrNotExist) {
		if err := buildPrevious(t, dir); err != nil {
			t.Fatalf("build the node plugin of the previous release %s: %v", previousRelease[:7], err)
		}
	}
	ref, err := realnode.PushNodePluginImage(context.Background(), env.Registry, dir, version)
	if err != nil {
		t.Fatalf("push the previous release's node plugin (built in %s; remove it to build it again): %v", dir, err)
	}
	return ref
}

// buildPrevious builds previousRelease's plugin and shim into dir/image.
func buildPrevious(t *testing.T, dir string) error {
	for _, tool := range []string{"git", "go", "make", "gcc", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, "building the previous release's node plugin needs %s: %v", tool, err)
		}
	}
	if out, err := exec.Command("git", "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		testenv.Unavailable(t, "the previous release's commit %s is not in this clone (%v: %s): fetch the full history (git fetch --unshallow)",
			previousRelease, err, strings.TrimSpace(string(out)))
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		testenv.Unavailable(t, "building the previous release's node plugin needs this repository's git history: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	// Built beside its final place and renamed there once complete: a
	// killed build leaves no half-built cache.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	image := filepath.Join(tmp, "out", "image")
	t.Logf("building the node plugin of the previous release %s into %s", previousRelease[:7], dir)
	for _, step := range [][]string{
		{"mkdir", "-p", src, filepath.Join(image, "shim")},
		{"git", "-C", strings.TrimSpace(string(top)), "archive", "--format=tar", "-o", src + ".tar", previousRelease},
		{"tar", "-xf", src + ".tar", "-C", src},
		{"go", "-C", src, "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", filepath.Join(image, "gpuslice-nodeplugin"), "./cmd/gpuslice-nodeplugin"},
		{"make", "-s", "-C", filepath.Join(src, "nodeplugin", "shim"), "lib", "OUT=" + filepath.Join(image, "shim"), "CFLAGS=-O2 -ffile-prefix-map=" + src + "=."},
	} {
		cmd := exec.Command(step[0], step[1:]...)
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(step, " "), err, out)
		}
	}
	if err := os.RemoveAll(dir); err != nil { // an incomplete build's
		return err
	}
	if err := os.Rename(filepath.Join(tmp, "out"), dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "image", "shim", "libgpuslice.so")); statErr == nil {
			return nil // another run built it meanwhile
		}
		return err
	}
	return nil
}
