package release

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gpuslice/gpuslice/internal/localregistry"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// What OpenTofu 1.12 checks, by installation method (internal/getproviders):
//   - registry: the zip's SHA-256 against the sums file, and the sums'
//     detached signature against the registry's public keys, always for a
//     host other than its default registry's;
//   - network mirror: the h1:/zh: hashes of the mirror's <version>.json
//     only (there is no signature in that protocol);
//   - oci_mirror: the layer's digest (a zh: hash) only.
// So the signature is tested through a registry, and the mirrors' packages
// are tied to it through the lock file: `providers lock` from the signed
// registry, then an install from the mirror that must match those hashes.

func TestNetworkMirrorInstallsEveryPlatform(t *testing.T) {
	testenv.Short(t, "builds the provider and runs tofu init")
	dir := packagedRelease(t)
	mirror := http.FileServer(http.Dir(filepath.Join(dir, MirrorDir)))
	url, cert := serveTLS(t, mirror)
	env := tofuEnv(t, "provider_installation {\n  network_mirror {\n    url = \""+url+"/\"\n  }\n}\n", cert)
	work := workDir(t)
	if out, err := tofu(t, work, env, "init", "-backend=false", "-input=false", "-no-color"); err != nil {
		t.Fatalf("tofu init from the network mirror: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(work, ".terraform", "providers", testAddress, testVersion, Host().String(), providerExecutable(testVersion, Host()))); err != nil {
		t.Errorf("tofu init did not install the provider: %v", err)
	}
	args := []string{"providers", "lock", "-net-mirror=" + url + "/"}
	for _, p := range Platforms {
		args = append(args, "-platform="+p.String())
	}
	if out, err := tofu(t, work, env, args...); err != nil {
		t.Fatalf("tofu providers lock from the network mirror: %v\n%s", err, out)
	}
	var doc struct {
		Archives map[string]struct{ Hashes []string }
	}
	data, _ := os.ReadFile(filepath.Join(dir, MirrorDir, testAddress, testVersion+".json"))
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.Archives) != len(Platforms) {
		t.Fatalf("mirror's %s.json: %v, %d archives, want %d", testVersion, err, len(doc.Archives), len(Platforms))
	}
	var want []string
	for _, a := range doc.Archives {
		want = append(want, a.Hashes...)
	}
	checkLock(t, work, want)

	// A package that is not the one the mirror's hashes name is refused.
	swapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".zip") {
			http.ServeFile(w, r, filepath.Join(dir, CLIZip(testVersion, Host())))
			return
		}
		mirror.ServeHTTP(w, r)
	})
	url, cert = serveTLS(t, swapped)
	env = tofuEnv(t, "provider_installation {\n  network_mirror {\n    url = \""+url+"/\"\n  }\n}\n", cert)
	if out, err := tofu(t, workDir(t), env, "init", "-backend=false", "-input=false", "-no-color"); err == nil {
		t.Fatalf("tofu init installed a package whose hash the mirror does not list:\n%s", out)
	}
}

func TestRegistryChecksTheSignature(t *testing.T) {
	testenv.Short(t, "builds the provider and runs tofu init")
	dir, signer := packagedRelease(t), newSigner(t, false)
	signature, err := os.ReadFile(filepath.Join(dir, SignatureOf(ProviderSums(testVersion))))
	if err != nil {
		t.Fatal(err)
	}
	url, cert := serveTLS(t, registryHandler(dir, signer, signature))
	env := tofuEnv(t, hostBlock(url), cert)
	work := workDir(t)
	out, err := tofu(t, work, env, "init", "-backend=false", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("tofu init from the registry: %v\n%s", err, out)
	}
	if want := "(signed, key ID " + signer.KeyID() + ")"; !strings.Contains(out, want) {
		t.Errorf("tofu init does not say %q:\n%s", want, out)
	}
	lockEveryPlatform(t, work, env)
	sums, err := ReadSums(filepath.Join(dir, ProviderSums(testVersion)))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, sum := range sums {
		want = append(want, "zh:"+sum)
	}
	checkLock(t, work, want)

	// The same sums signed by a key the registry does not list.
	other := newSigner(t, true)
	forged := filepath.Join(t.TempDir(), "SHA256SUMS")
	data, _ := os.ReadFile(filepath.Join(dir, ProviderSums(testVersion)))
	os.WriteFile(forged, data, 0o644)
	if err := other.signFile(forged); err != nil {
		t.Fatal(err)
	}
	badSignature, _ := os.ReadFile(SignatureOf(forged))
	url, cert = serveTLS(t, registryHandler(dir, signer, badSignature))
	env = tofuEnv(t, hostBlock(url), cert)
	out, err = tofu(t, workDir(t), env, "init", "-backend=false", "-input=false", "-no-color")
	if err == nil || !strings.Contains(out, "not signed with a valid signing key") {
		t.Fatalf("tofu init with the sums signed by another key: %v, want a refusal saying the provider is not signed with a valid signing key:\n%s", err, out)
	}
}

func TestOCIMirrorInstalls(t *testing.T) {
	testenv.Short(t, "builds the provider and runs tofu init")
	dir, signer := packagedRelease(t), newSigner(t, false)
	reg, err := localregistry.StartTLS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Stop() })
	repository := reg.Addr() + "/gpuslice/terraform-provider-" + ProviderType
	if _, err := PushOCI(context.Background(), dir, testVersion, repository, remote.WithTransport(reg.Transport())); err != nil {
		t.Fatal(err)
	}
	signature, _ := os.ReadFile(filepath.Join(dir, SignatureOf(ProviderSums(testVersion))))
	url, cert := serveTLS(t, registryHandler(dir, signer, signature))
	// oci_mirror is the only installation method; the host block serves
	// providers lock, which asks the provider's origin registry.
	env := tofuEnv(t, hostBlock(url)+"provider_installation {\n  oci_mirror {\n    repository_template = \""+
		reg.Addr()+"/gpuslice/terraform-provider-${type}\"\n    include = [\""+testAddress+"\"]\n  }\n}\n", cert, reg.CertPEM)
	work := workDir(t)
	if out, err := tofu(t, work, env, "init", "-backend=false", "-input=false", "-no-color"); err != nil {
		t.Fatalf("tofu init from the OCI mirror: %v\n%s", err, out)
	}
	sums, err := ReadSums(filepath.Join(dir, ProviderSums(testVersion)))
	if err != nil {
		t.Fatal(err)
	}
	// The OCI layer is the signed release's zip.
	checkLock(t, work, []string{"zh:" + sums[ProviderZip(testVersion, Host())]})
	lockEveryPlatform(t, work, env)
	// With the lock the signed registry wrote, the OCI mirror's package
	// still installs: its bytes are what the signature covers.
	os.RemoveAll(filepath.Join(work, ".terraform"))
	if out, err := tofu(t, work, env, "init", "-backend=false", "-input=false", "-no-color"); err != nil {
		t.Fatalf("tofu init from the OCI mirror against the registry's lock: %v\n%s", err, out)
	}
}

// lockEveryPlatform runs tofu providers lock for every release platform
// against the provider's (signed) registry.
func lockEveryPlatform(t *testing.T, work string, env []string) {
	t.Helper()
	args := []string{"providers", "lock"}
	for _, p := range Platforms {
		args = append(args, "-platform="+p.String())
	}
	if out, err := tofu(t, work, env, args...); err != nil {
		t.Fatalf("tofu providers lock for every platform: %v\n%s", err, out)
	}
}

// checkLock fails unless the lock file records each of hashes.
func checkLock(t *testing.T, work string, hashes []string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(work, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hashes {
		if !strings.Contains(string(lock), `"`+h+`"`) {
			t.Errorf(".terraform.lock.hcl lacks %s:\n%s", h, lock)
		}
	}
}
