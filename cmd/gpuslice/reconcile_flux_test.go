package main

import (
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/fluxtest"
	"github.com/gpuslice/gpuslice/internal/gitserver"
)

// guideBlock is the guide's first fenced block of lang that holds want.
func guideBlock(t *testing.T, lang, want string) string {
	t.Helper()
	b, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)\n```").FindAllSubmatch(b, -1) {
		if strings.Contains(string(m[1]), want) {
			return string(m[1])
		}
	}
	t.Fatalf("%s has no ```%s block holding %q", guide, lang, want)
	return ""
}

// TestReconcileGuideFluxSetup runs the guide's Flux setup as written: its
// GitRepository (with a repository URL of this machine) for a real
// source-controller, and its command, which applies the commit's artifact
// and reports it in the status ConfigMap; SIGTERM stops it.
func TestReconcileGuideFluxSetup(t *testing.T) {
	c := clustertest.Shared(t)
	var repo map[string]any
	if err := yaml.Unmarshal([]byte(guideBlock(t, "yaml", "kind: GitRepository")), &repo); err != nil {
		t.Fatal(err)
	}
	meta, spec := repo["metadata"].(map[string]any), repo["spec"].(map[string]any)
	f := fluxtest.Start(t, c, meta["namespace"].(string))
	srv := gitserver.New(t)
	rev := "main@sha1:" + srv.Commit("prod", map[string]string{"stacks/prod/main.tf": stackConfig("prod", 1, "8192")})
	if spec["url"] != "https://git.example.com/platform/gpu-stacks.git" {
		t.Fatalf("the guide's GitRepository fetches %v, not the repository this test replaces", spec["url"])
	}
	spec["url"] = srv.URL
	f.Create(t, fluxtest.GitRepositories, repo)
	// The command's first round then finds the artifact (an earlier one
	// fails and retries after the guide's 30s).
	f.WaitSource(t, fluxtest.GitRepositories, meta["namespace"].(string), meta["name"].(string), "the artifact", func(u *unstructured.Unstructured) bool {
		return fluxtest.ArtifactRevision(u) == rev
	})

	block := guideBlock(t, "sh", "-flux-source")
	args := strings.Fields(strings.ReplaceAll(block, "\\\n", " "))
	if args[0] != "gpuslice" {
		t.Fatalf("the guide's -flux-source block does not start with gpuslice: %q", block)
	}
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}
	cmd, out, exited := start(t, env, args[1:]...)
	t.Cleanup(func() {
		if out, code := run(t, env, "destroy", "-stack", "prod", "-auto-approve", writeConfig(t, "")); code != 0 {
			t.Errorf("destroy stack prod: exit %d\n%s", code, out)
		}
	})
	waitApplied(t, c, "prod", rev, out.String)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-exited
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("reconcile exited %d on SIGTERM:\n%s", code, out.String())
	}
}
