package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/engine/reconcile"
	"github.com/gpuslice/gpuslice/internal/gitserver"
)

// TestGitFollowsBranchTagAndHash clones over smart HTTP, then each Fetch
// sees the branch's newest commit; a tag and a hash stay where they are, a
// file deleted upstream is gone, and a path outside the repository or a
// ref it lacks is refused by name.
func TestGitFollowsBranchTagAndHash(t *testing.T) {
	srv := gitserver.New(t)
	rev1 := srv.Commit("one", map[string]string{"stacks/a/main.tf": "# one\n", "stacks/a/old.tf": "# old\n"})
	srv.Git(srv.Work, "tag", "v1")
	srv.Git(srv.Work, "push", "-q", "origin", "v1")
	ctx := context.Background()
	branch := &reconcile.Git{URL: srv.URL, Ref: "main", Path: "stacks/a", WorkDir: t.TempDir()}
	got, err := branch.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != rev1 || got.Time.IsZero() {
		t.Fatalf("first fetch: revision %q at %s, want %s", got.ID, got.Time, rev1)
	}
	assertFile(t, got.Dir, "main.tf", "# one\n")

	srv.Git(srv.Work, "rm", "-q", "stacks/a/old.tf")
	rev2 := srv.Commit("two", map[string]string{"stacks/a/main.tf": "# two\n"})
	if got, err = branch.Fetch(ctx); err != nil || got.ID != rev2 {
		t.Fatalf("fetch after a push: revision %q, %v; want %s", got.ID, err, rev2)
	}
	assertFile(t, got.Dir, "main.tf", "# two\n")
	if _, err := os.Stat(filepath.Join(got.Dir, "old.tf")); !os.IsNotExist(err) {
		t.Errorf("old.tf, deleted upstream, is still in the checkout (%v)", err)
	}

	for _, ref := range []string{"v1", rev1, rev1[:10]} {
		g := &reconcile.Git{URL: srv.URL, Ref: ref, Path: "stacks/a", WorkDir: t.TempDir()}
		if got, err := g.Fetch(ctx); err != nil || got.ID != rev1 {
			t.Errorf("ref %s: revision %q, %v; want %s", ref, got.ID, err, rev1)
		}
	}
	for _, c := range []struct{ ref, path, want string }{
		{"nope", "stacks/a", `git ref "nope"`},
		{"main", "../etc", `git path "../etc"`},
		{"main", "stacks/b", `git path "stacks/b" is not a directory in commit ` + rev2},
	} {
		g := &reconcile.Git{URL: srv.URL, Ref: c.ref, Path: c.path, WorkDir: t.TempDir()}
		if _, err := g.Fetch(ctx); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ref %s path %s: error %v, want one containing %q", c.ref, c.path, err, c.want)
		}
	}
}

func assertFile(t *testing.T, dir, name, want string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || string(b) != want {
		t.Errorf("%s: %q, %v; want %q", name, b, err, want)
	}
}
