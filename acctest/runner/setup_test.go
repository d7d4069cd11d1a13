package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/localregistry"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/internal/release"
	"github.com/gpuslice/gpuslice/internal/release/releasetest"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// providerVersion is the release the runner installs.
const providerVersion = "0.1.0"

// providerAddress is the provider's source address in the stack.
const providerAddress = "registry.terraform.io/gpuslice/gpuslice"

// publishProvider makes a signed release of the provider for this machine's
// platform, as `make release` does, and pushes it, as `make release-oci`
// does, to a registry served over HTTPS that the node's pods reach as
// localregistry.Host (port 443 of their node). It returns the registry's
// certificate, which the runner image trusts.
func publishProvider(t *testing.T, env *realnodetest.Env) []byte {
	t.Helper()
	reg := publishRelease(t)
	if err := env.Nodes[0].Forward(443, reg.Addr()); err != nil {
		t.Fatal(err)
	}
	return reg.CertPEM
}

// publishRelease pushes a signed release of the provider for this
// machine's platform to a new HTTPS registry, stopped at the test's end.
func publishRelease(t *testing.T) *localregistry.Registry {
	t.Helper()
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "release")
	err := release.Make(ctx, release.Options{ModuleDir: moduleDir(t), Version: providerVersion, Address: providerAddress,
		Platforms: []release.Platform{release.Host()}, Out: out, Signer: throwawaySigner(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := localregistry.StartTLS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Stop() })
	repository := reg.Addr() + "/gpuslice/terraform-provider-" + release.ProviderType
	if _, err := release.PushOCI(ctx, out, providerVersion, repository, remote.WithTransport(reg.Transport())); err != nil {
		t.Fatal(err)
	}
	return reg
}

// pushRunnerImage builds the runner image (bin/tofu, trusting caPEM) and
// pushes it to the registry the nodes pull from.
func pushRunnerImage(t *testing.T, env *realnodetest.Env, caPEM []byte) {
	t.Helper()
	bundle := filepath.Join(t.TempDir(), "ca-certificates.crt")
	if err := os.WriteFile(bundle, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := images.TofuRunnerImage(env.BinDir, bundle)
	if err != nil {
		testenv.Unavailable(t, "runner image: %v", err)
	}
	if _, err := env.Registry.Push(context.Background(), images.TofuRunner, img); err != nil {
		t.Fatal(err)
	}
}

// throwawaySigner signs the release with a key made for this test.
func throwawaySigner(t *testing.T) *release.Signer {
	t.Helper()
	s, err := release.NewSigner(releasetest.Armor(t, releasetest.NewKey(t, "runner")), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// moduleDir is the root of the gpuslice module, which the release builds.
func moduleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "go.mod") {
		testenv.Unavailable(t, "go env GOMOD: %v (%s): the release is built with the go command", err, out)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
