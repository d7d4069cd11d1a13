package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuslice/gpuslice/engine/reconcile"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/freeport"
	"github.com/gpuslice/gpuslice/internal/gitserver"
)

const guide = "../../templates/guides/in-cluster-reconcile.md"

// guideSetup is the guide's `gpuslice reconcile` block as arguments.
func guideSetup(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sh\n(gpuslice reconcile .*?)\n```").FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no ```sh block starting with gpuslice reconcile", guide)
	}
	return strings.Fields(strings.ReplaceAll(string(m[1]), "\\\n", " "))[1:]
}

// TestReconcileGuideSetup runs the guide's setup as written, with the
// repository URL and the metrics port of this machine: the commit is
// applied and reported in the status ConfigMap and on /metrics, and
// SIGTERM stops it.
func TestReconcileGuideSetup(t *testing.T) {
	c := clustertest.Shared(t)
	srv := gitserver.New(t)
	rev := srv.Commit("prod", map[string]string{"stacks/prod/main.tf": stackConfig("prod", 1, "8192")})
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	args := guideSetup(t)
	for i, a := range args {
		switch a {
		case "https://git.example.com/platform/gpu-stacks.git":
			args[i] = srv.URL
		case ":9402":
			args[i] = addr
		}
	}
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}
	cmd, out, exited := start(t, env, args...)
	t.Cleanup(func() {
		if out, code := run(t, env, "destroy", "-stack", "prod", "-auto-approve", writeConfig(t, "")); code != 0 {
			t.Errorf("destroy stack prod: exit %d\n%s", code, out)
		}
	})

	waitApplied(t, c, "prod", rev, out.String)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`gpuslice_reconcile_last_applied_revision{revision="` + rev + `",stack="prod"} 1`,
		`gpuslice_reconcile_in_sync{stack="prod"} 1`, `gpuslice_reconcile_errors_total{stack="prod"} 0`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-exited
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("reconcile exited %d on SIGTERM:\n%s", code, out.String())
	}
}

// TestReconcileSourceFlags: one source at a time, named by its flags, and
// a Flux source spelled kind/namespace/name, before any cluster is read.
func TestReconcileSourceFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-git-url", "https://git.example.com/a.git", "-flux-source", "gitrepository/flux-system/a", "-stack", "a"}, "give -git-url or -flux-source, not both"},
		{[]string{"-flux-source", "gitrepository/flux-system/a", "-stack", "a", "dir"}, "give a directory or -flux-source, not both"},
		{[]string{"-flux-source", "gitrepository/flux-system/a"}, "reconcile -flux-source needs -stack"},
		{[]string{"-flux-source", "helmrepository/flux-system/a", "-stack", "a"}, `flux source "helmrepository/flux-system/a": write kind/namespace/name`},
		{[]string{"-flux-source", "gitrepository/a", "-stack", "a"}, `flux source "gitrepository/a"`},
		{[]string{"-git-url", "https://git.example.com/a.git", "dir", "-stack", "a"}, "give a directory or -git-url, not both"},
		{[]string{"-flux-source", "gitrepository/flux-system/a", "-git-ref", "v1", "-stack", "a"}, "-git-ref does not apply to -flux-source"},
	} {
		out, code := run(t, []string{"KUBECONFIG=/nonexistent"}, append([]string{"reconcile", "-once"}, c.args...)...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("reconcile %v: exit %d, output %q; want an error containing %q", c.args, code, out, c.want)
		}
	}
}

// waitApplied waits until stack's status ConfigMap shows rev applied and
// in sync; log gives the reconcile's output for the failure message.
func waitApplied(t *testing.T, c *cluster.Cluster, stack, rev string, log func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound for a hung test, not a timing assertion
	defer cancel()
	lw := cache.NewListWatchFromClient(c.Client().CoreV1().RESTClient(), "configmaps", "gpuslice-system", fields.OneTermEqualSelector("metadata.name", reconcile.StatusName(stack)))
	if _, err := watchtools.UntilWithSync(ctx, lw, &corev1.ConfigMap{}, nil, func(ev watch.Event) (bool, error) {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		return ok && cm.Data[reconcile.KeyLastAppliedRevision] == rev && cm.Data[reconcile.KeyInSync] == "true", nil
	}); err != nil {
		t.Fatalf("status ConfigMap of stack %s never showed revision %s applied: %v\n%s", stack, rev, err, log())
	}
}
