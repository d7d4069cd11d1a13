// Package gitserver serves a Git repository on this machine for tests, as
// a Git host does: a bare repository behind Git's own smart-HTTP backend
// (git-http-backend through net/http/cgi). The code under test clones it
// over HTTP; the test commits with the git command line.
package gitserver

import (
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/internal/testenv"
)

// Server is a bare repository served over HTTP; commits reach it by a
// push from a working clone.
type Server struct {
	t testing.TB
	// Work is the working clone Commit pushes from.
	Work string
	env  []string
	// URL is the repository's clone URL.
	URL string
}

// New serves an empty repository (branch main) until t ends; it skips
// through testenv when git or its HTTP backend is missing.
func New(t testing.TB) *Server {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		testenv.Unavailable(t, "needs git to serve a repository: %v", err)
	}
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		testenv.Unavailable(t, "git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		testenv.Unavailable(t, "needs git-http-backend: %v", err)
	}
	root, work := t.TempDir(), t.TempDir()
	g := &Server{t: t, Work: work, env: append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=gitops", "GIT_AUTHOR_EMAIL=gitops@example.com", "GIT_COMMITTER_NAME=gitops", "GIT_COMMITTER_EMAIL=gitops@example.com")}
	g.Git(root, "init", "--bare", "--initial-branch=main", "stacks.git")
	g.Git(work, "init", "--initial-branch=main")
	g.Git(work, "remote", "add", "origin", filepath.Join(root, "stacks.git"))
	srv := httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	t.Cleanup(srv.Close)
	g.URL = srv.URL + "/stacks.git"
	return g
}

// Git runs git in dir and returns its output; failing fails the test.
func (g *Server) Git(dir string, args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, g.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Commit writes files (path: content) and pushes them to main, returning
// the commit's hash.
func (g *Server) Commit(msg string, files map[string]string) string {
	g.t.Helper()
	for name, content := range files {
		p := filepath.Join(g.Work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
	g.Git(g.Work, "add", "-A")
	g.Git(g.Work, "commit", "-q", "-m", msg)
	g.Git(g.Work, "push", "-q", "origin", "main")
	return g.Git(g.Work, "rev-parse", "HEAD")
}
