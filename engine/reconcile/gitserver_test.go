package reconcile_test

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

// gitServer is a bare repository served over HTTP by Git's own smart-HTTP
// backend, as a Git host serves it; commits reach it by a push from a
// working clone.
type gitServer struct {
	t    *testing.T
	work string
	env  []string
	// URL is the repository's clone URL.
	URL string
}

func newGitServer(t *testing.T) *gitServer {
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
	g := &gitServer{t: t, work: work, env: append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=gitops", "GIT_AUTHOR_EMAIL=gitops@example.com", "GIT_COMMITTER_NAME=gitops", "GIT_COMMITTER_EMAIL=gitops@example.com")}
	g.git(root, "init", "--bare", "--initial-branch=main", "stacks.git")
	g.git(work, "init", "--initial-branch=main")
	g.git(work, "remote", "add", "origin", filepath.Join(root, "stacks.git"))
	srv := httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	t.Cleanup(srv.Close)
	g.URL = srv.URL + "/stacks.git"
	return g
}

func (g *gitServer) git(dir string, args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, g.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (path: content) and pushes them to main, returning
// the commit's hash.
func (g *gitServer) commit(msg string, files map[string]string) string {
	g.t.Helper()
	for name, content := range files {
		p := filepath.Join(g.work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
	g.git(g.work, "add", "-A")
	g.git(g.work, "commit", "-q", "-m", msg)
	g.git(g.work, "push", "-q", "origin", "main")
	return g.git(g.work, "rev-parse", "HEAD")
}
