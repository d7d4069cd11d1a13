package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// Git is a Git repository that the loop clones into WorkDir on the first
// round and fetches on every later one, with go-git: no git binary in the
// image, and nothing written outside WorkDir (a read-only root keeps
// working with an emptyDir there).
type Git struct {
	// URL is the repository to clone (https:// or http://).
	URL string
	// Ref is a branch, a tag, or a commit hash.
	Ref string
	// Path is the configuration's directory inside the repository.
	Path string
	// WorkDir holds the clone; it is created when missing.
	WorkDir string

	repo *git.Repository
}

func (g *Git) String() string {
	s := g.URL + "@" + g.Ref
	if g.Path != "" && g.Path != "." {
		s += ":" + g.Path
	}
	return s
}

// Fetch brings the clone up to date and checks out Ref's commit.
func (g *Git) Fetch(ctx context.Context) (Revision, error) {
	if !filepath.IsLocal(filepath.Clean(g.Path)) && filepath.Clean(g.Path) != "." {
		return Revision{}, fmt.Errorf("git path %q: name a directory inside the repository, relative to its root", g.Path)
	}
	if err := g.update(ctx); err != nil {
		return Revision{}, err
	}
	hash, err := g.resolve()
	if err != nil {
		return Revision{}, err
	}
	wt, err := g.repo.Worktree()
	if err != nil {
		return Revision{}, fmt.Errorf("git clone of %s in %s: %w", g.URL, g.WorkDir, err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Hash: hash, Force: true}); err != nil {
		return Revision{}, fmt.Errorf("check out %s (%s) of %s in %s: %w", g.Ref, hash, g.URL, g.WorkDir, err)
	}
	commit, err := g.repo.CommitObject(hash)
	if err != nil {
		return Revision{}, fmt.Errorf("read commit %s of %s: %w", hash, g.URL, err)
	}
	dir := filepath.Join(g.clonePath(), filepath.Clean(g.Path))
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return Revision{}, fmt.Errorf("git path %q is not a directory in commit %s of %s (%s): fix the path or the ref", g.Path, hash, g.URL, g.Ref)
	}
	return Revision{ID: hash.String(), Dir: dir, Root: g.clonePath(), Time: commit.Committer.When}, nil
}

func (g *Git) clonePath() string { return filepath.Join(g.WorkDir, "repo") }

// refSpecs fetch every branch and tag, so Ref may name any of them.
var refSpecs = []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"}

func (g *Git) update(ctx context.Context) error {
	if g.repo == nil {
		// A clone a previous process left is taken from scratch: it may
		// be half-written.
		if err := os.RemoveAll(g.clonePath()); err != nil {
			return fmt.Errorf("clear the clone directory %s: %w", g.clonePath(), err)
		}
		repo, err := git.PlainCloneContext(ctx, g.clonePath(), false, &git.CloneOptions{URL: g.URL, NoCheckout: true, Tags: git.AllTags})
		if err != nil {
			return fmt.Errorf("git clone %s into %s: %w", g.URL, g.clonePath(), err)
		}
		g.repo = repo
		return nil
	}
	err := g.repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RefSpecs: refSpecs, Force: true, Prune: true})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("git fetch %s: %w", g.URL, err)
	}
	return nil
}

// resolve finds Ref's commit: a branch first, then a tag, then a hash.
func (g *Git) resolve() (plumbing.Hash, error) {
	for _, name := range []string{"refs/remotes/origin/" + g.Ref, "refs/tags/" + g.Ref, g.Ref} {
		if h, err := g.repo.ResolveRevision(plumbing.Revision(name)); err == nil {
			return *h, nil
		}
	}
	return plumbing.ZeroHash, fmt.Errorf("git ref %q: no branch, tag or commit of that name in %s: name one the repository has", g.Ref, g.URL)
}
