package reconcile_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/reconcile"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/fluxtest"
	"github.com/gpuslice/gpuslice/internal/gitserver"
)

const fluxNS = "flux-system"

// TestReconcileFollowsFlux runs the loop on the artifacts of a real Flux
// source-controller's GitRepository, itself following a Git repository
// served over smart HTTP: the first artifact is applied at its revision; a
// commit becomes a new artifact, which the loop applies and reports
// (status ConfigMap, Events, metrics); a forged artifact (other bytes than
// the object's digest) is refused with the error in the status and the
// cluster stays at the last good revision until the real one is served.
func TestReconcileFollowsFlux(t *testing.T) {
	c := clustertest.Shared(t)
	client := c.Client()
	const ns, stack, name = "fluxops", "fluxops", "gpu-stacks"
	f := fluxtest.Start(t, c, fluxNS)
	srv := gitserver.New(t)
	file := "stacks/fluxops/main.tf"
	rev1 := srv.Commit("first", map[string]string{file: quickstart(ns, "2Gi")})
	f.Create(t, fluxtest.GitRepositories, fluxtest.GitRepository(fluxNS, name, srv.URL, "2s"))
	f.WaitSource(t, fluxtest.GitRepositories, fluxNS, name, "the first artifact", func(u *unstructured.Unstructured) bool {
		return fluxtest.ArtifactRevision(u) == "main@sha1:"+rev1
	})

	reg, invNS := startLoop(t, c, stack, func(e *engine.Engine) reconcile.Source {
		return &reconcile.Flux{Client: e.Clients.Dynamic, Kind: "GitRepository", Namespace: fluxNS, Name: name, Path: "stacks/fluxops", WorkDir: t.TempDir()}
	})
	statusName := reconcile.StatusName(stack)

	d := waitStatus(t, client, invNS, stack, "the first artifact applied", func(d map[string]string) bool {
		return d[reconcile.KeyLastAppliedRevision] == "main@sha1:"+rev1 && d[reconcile.KeyInSync] == "true"
	})
	if want := "GitRepository flux-system/gpu-stacks:stacks/fluxops"; d[reconcile.KeySource] != want {
		t.Errorf("status source = %q, want %q", d[reconcile.KeySource], want)
	}
	assertMemory(t, client, ns, "2Gi")

	start := time.Now()
	rev2 := "main@sha1:" + srv.Commit("more memory", map[string]string{file: quickstart(ns, "3Gi")})
	f.WaitSource(t, fluxtest.GitRepositories, fluxNS, name, "the second commit's artifact", func(u *unstructured.Unstructured) bool { return fluxtest.ArtifactRevision(u) == rev2 })
	made := time.Now()
	waitStatus(t, client, invNS, stack, "the second artifact applied", func(d map[string]string) bool {
		return d[reconcile.KeyLastAppliedRevision] == rev2
	})
	t.Logf("commit pushed → Flux artifact %s, → applied %s later (loop interval %s, GitRepository interval 2s)",
		made.Sub(start).Round(time.Millisecond), time.Since(made).Round(time.Millisecond), interval)
	assertMemory(t, client, ns, "3Gi")
	waitEvent(t, client, invNS, statusName, reconcile.ReasonApplied, "applied revision "+rev2+": 0 added, 1 changed")
	assertMetrics(t, reg, stack, rev2, 1, 0)

	// The next artifact is forged on its way: a stack asking for 9Gi.
	forged := fluxtest.TarGz(t, map[string]string{file: quickstart(ns, "9Gi")})
	f.Forged.Store(&forged)
	rev3 := "main@sha1:" + srv.Commit("fix", map[string]string{file: quickstart(ns, "4Gi")})
	d = waitStatus(t, client, invNS, stack, "the forged artifact refused", func(d map[string]string) bool {
		return d[reconcile.KeyRevision] == rev3 && d[reconcile.KeyInSync] == "false"
	})
	if d[reconcile.KeyLastAppliedRevision] != rev2 || !strings.Contains(d[reconcile.KeyLastError], "digest mismatch") || d[reconcile.KeyLastRound] != "failed" {
		t.Errorf("status after a forged artifact = %v, want lastAppliedRevision %s, lastRound failed and lastError saying digest mismatch", d, rev2)
	}
	waitEvent(t, client, invNS, statusName, reconcile.ReasonFailed, "digest mismatch")
	assertMemory(t, client, ns, "3Gi")

	f.Forged.Store(nil)
	waitStatus(t, client, invNS, stack, "the real artifact applied once served", func(d map[string]string) bool {
		return d[reconcile.KeyLastAppliedRevision] == rev3 && d[reconcile.KeyInSync] == "true" && d[reconcile.KeyLastError] == ""
	})
	assertMemory(t, client, ns, "4Gi")
}
