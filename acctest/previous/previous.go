// Package previous is the release before this one as the upgrade and
// rollback tests install it: its commit, and what they build of it (its
// provider, its node plugin), from its sources in this repository's
// history, cached under bin/previous/<commit> so only the first run pays.
package previous

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/internal/testenv"
)

// Commit is the last commit of the previous release (0.1.0 before any-size
// packages): its provider wrote the state the upgrade test starts from, and
// its node plugin writes checkpoint format v2 whatever it holds and stops
// on a format it does not know.
const Commit = "29a6e704f5ed1da02c41ffeb065f3160b3f92570"

// Built returns binDir/previous/<Commit>/<what>, building it first with
// build(src, out) from the previous release's sources src into out when
// it is not there. The build runs beside its final place and is renamed
// there once complete, so a killed build leaves no half-built cache.
func Built(t testing.TB, binDir, what string, build func(src, out string) error) string {
	t.Helper()
	dir := filepath.Join(binDir, "previous", Commit, what)
	if _, err := os.Stat(dir); err == nil {
		return dir
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, tool := range []string{"git", "go", "make", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, "building the previous release needs %s: %v", tool, err)
		}
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		testenv.Unavailable(t, "building the previous release needs this repository's git history: %v", err)
	}
	root := strings.TrimSpace(string(top))
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", Commit+"^{commit}").CombinedOutput(); err != nil {
		testenv.Unavailable(t, "the previous release's commit %s is not in this clone (%v: %s): fetch the full history (git fetch --unshallow)",
			Commit, err, strings.TrimSpace(string(out)))
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-"+what+"-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	src, out := filepath.Join(tmp, "src"), filepath.Join(tmp, "out")
	t.Logf("building the previous release's %s (%s) into %s", what, Commit[:7], dir)
	for _, step := range [][]string{
		{"mkdir", "-p", src, out},
		{"git", "-C", root, "archive", "--format=tar", "-o", src + ".tar", Commit},
		{"tar", "-xf", src + ".tar", "-C", src},
	} {
		if b, err := exec.Command(step[0], step[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(step, " "), err, b)
		}
	}
	if err := build(src, out); err != nil {
		t.Fatalf("build the previous release's %s: %v", what, err)
	}
	if err := os.Rename(out, dir); err != nil {
		if _, statErr := os.Stat(dir); statErr == nil {
			return dir // another run built it meanwhile
		}
		t.Fatal(err)
	}
	return dir
}

// Run runs a build step in dir, its output in the error.
func Run(dir string, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return nil
}
