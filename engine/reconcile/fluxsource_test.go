package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine/reconcile"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/fluxtest"
	"github.com/gpuslice/gpuslice/internal/gitserver"
	"github.com/gpuslice/gpuslice/internal/localregistry"
)

// TestFluxSourceReadsArtifacts reads a real source-controller's artifacts:
// a GitRepository's is downloaded once per revision (a round with the same
// digest reuses the extraction, a new one replaces it); an OCIRepository's
// (an artifact pushed to a registry, as `flux push artifact` does) is read
// alike; and a source that is missing, has no artifact yet, or lacks the
// path is refused naming the object and what to do.
func TestFluxSourceReadsArtifacts(t *testing.T) {
	c := clustertest.Shared(t)
	f := fluxtest.Start(t, c, fluxNS)
	srv := gitserver.New(t)
	rev1 := "main@sha1:" + srv.Commit("one", map[string]string{"stacks/a/main.tf": "# one\n"})
	f.Create(t, fluxtest.GitRepositories, fluxtest.GitRepository(fluxNS, "good", srv.URL, "2s"))
	f.Create(t, fluxtest.GitRepositories, fluxtest.GitRepository(fluxNS, "broken", "http://"+fluxtest.FreeAddr(t)+"/absent.git", "2s"))
	f.WaitSource(t, fluxtest.GitRepositories, fluxNS, "good", "the first artifact", func(u *unstructured.Unstructured) bool { return fluxtest.ArtifactRevision(u) == rev1 })
	ctx := context.Background()
	dyn := f.Dyn
	good := &reconcile.Flux{Client: dyn, Kind: "GitRepository", Namespace: fluxNS, Name: "good", Path: "stacks/a", WorkDir: t.TempDir()}

	before := f.Downloads.Load()
	got, err := good.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != rev1 || got.Time.IsZero() || got.Dir != filepath.Join(got.Root, "stacks/a") {
		t.Errorf("first fetch = %+v, want revision %s, a time, and Dir stacks/a of Root", got, rev1)
	}
	assertFile(t, got.Dir, "main.tf", "# one\n")
	again, err := good.Fetch(ctx)
	if err != nil || again != got {
		t.Errorf("second fetch of the same artifact = %+v, %v; want %+v", again, err, got)
	}
	if n := f.Downloads.Load() - before; n != 1 {
		t.Errorf("two fetches of one artifact downloaded it %d times, want 1", n)
	}

	rev2 := "main@sha1:" + srv.Commit("two", map[string]string{"stacks/a/main.tf": "# two\n"})
	f.WaitSource(t, fluxtest.GitRepositories, fluxNS, "good", "the second artifact", func(u *unstructured.Unstructured) bool { return fluxtest.ArtifactRevision(u) == rev2 })
	next, err := good.Fetch(ctx)
	if err != nil || next.ID != rev2 || next.Root == got.Root {
		t.Fatalf("fetch after a commit = %+v, %v; want revision %s in a new directory", next, err, rev2)
	}
	assertFile(t, next.Dir, "main.tf", "# two\n")
	if _, err := os.Stat(got.Root); !os.IsNotExist(err) {
		t.Errorf("the previous extraction %s is still there (%v)", got.Root, err)
	}

	ociRevision := pushStacks(t, f)
	oci := &reconcile.Flux{Client: dyn, Kind: "OCIRepository", Namespace: fluxNS, Name: "oci", Path: "stacks/a", WorkDir: t.TempDir()}
	if got, err := oci.Fetch(ctx); err != nil || got.ID != ociRevision {
		t.Errorf("OCIRepository fetch = %+v, %v; want revision %s", got, err, ociRevision)
	} else {
		assertFile(t, got.Dir, "main.tf", "# from oci\n")
	}

	f.WaitSource(t, fluxtest.GitRepositories, fluxNS, "broken", "the broken source not ready", func(u *unstructured.Unstructured) bool {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Ready" && m["status"] == "False" {
				return true
			}
		}
		return false
	})
	for _, c := range []struct {
		src  reconcile.Flux
		want string
	}{
		{reconcile.Flux{Kind: "GitRepository", Name: "absent"}, "GitRepository flux-system/absent not found"},
		{reconcile.Flux{Kind: "GitRepository", Name: "broken"}, "GitRepository flux-system/broken has no artifact yet (Ready is False: "},
		{reconcile.Flux{Kind: "GitRepository", Name: "good", Path: "stacks/b"}, `path "stacks/b" is not a directory in the artifact of GitRepository flux-system/good at revision ` + rev2},
		{reconcile.Flux{Kind: "GitRepository", Name: "good", Path: "../b"}, `path "../b" of GitRepository flux-system/good: name a directory inside the artifact`},
	} {
		src := c.src
		src.Client, src.Namespace, src.WorkDir = dyn, fluxNS, t.TempDir()
		if _, err := src.Fetch(ctx); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", src.String(), err, c.want)
		}
	}
}

// pushStacks pushes an artifact holding stacks/a/main.tf to a registry,
// as `flux push artifact` does, creates the OCIRepository oci following
// it, and returns the revision of its artifact once made.
func pushStacks(t *testing.T, f *fluxtest.Flux) string {
	t.Helper()
	reg, err := localregistry.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	layer := static.NewLayer(fluxtest.TarGz(t, map[string]string{"stacks/a/main.tf": "# from oci\n"}), "application/vnd.cncf.flux.content.v1.tar+gzip")
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), "application/vnd.cncf.flux.config.v1+json"), layer)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := reg.Push(context.Background(), localregistry.Host+"/stacks:v1", img)
	if err != nil {
		t.Fatal(err)
	}
	f.Create(t, fluxtest.OCIRepositories, map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
		"metadata": map[string]any{"name": "oci", "namespace": fluxNS},
		"spec":     map[string]any{"url": "oci://" + reg.Addr() + "/stacks", "insecure": true, "interval": "2s", "ref": map[string]any{"tag": "v1"}},
	})
	want := "v1@" + digest.String()
	f.WaitSource(t, fluxtest.OCIRepositories, fluxNS, "oci", "the OCI artifact", func(u *unstructured.Unstructured) bool { return fluxtest.ArtifactRevision(u) == want })
	return want
}
