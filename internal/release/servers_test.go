package release

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// providerHost is the test provider's registry host: a .test name, which
// never resolves; a host block in OpenTofu's CLI configuration sends it
// to the test's server.
const (
	providerHost = "providers.gpuslice.test"
	testAddress  = providerHost + "/gpuslice/" + ProviderType
)

var (
	releaseOnce sync.Once
	releaseTmp  string
	releaseDir  string
	releaseErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if releaseTmp != "" {
		os.RemoveAll(releaseTmp)
	}
	os.Exit(code)
}

// packagedRelease is a release of every platform, signed with testKey,
// made once for the tests that install it with OpenTofu. Its provider is
// built for this machine only, and every platform's zip holds that build:
// what OpenTofu checks of the other platforms' packages (names, hashes,
// the signature over their sums) does not depend on what they run, and
// make release builds each for real.
func packagedRelease(t *testing.T) string {
	t.Helper()
	mod, signer := moduleDir(t), newSigner(t, false)
	releaseOnce.Do(func() {
		if releaseTmp, releaseErr = os.MkdirTemp("", "gpuslice-release-test-"); releaseErr != nil {
			return
		}
		var built Binaries
		built, releaseErr = Builder{ModuleDir: mod, Version: testVersion}.Build(context.Background(), Host(), filepath.Join(releaseTmp, "build"))
		if releaseErr != nil {
			return
		}
		all := map[Platform]Binaries{}
		for _, p := range Platforms {
			all[p] = built
		}
		dir := filepath.Join(releaseTmp, testVersion)
		if releaseErr = os.MkdirAll(dir, 0o755); releaseErr != nil {
			return
		}
		if releaseErr = Package(dir, testVersion, all, signer); releaseErr == nil {
			releaseErr = WriteNetworkMirror(dir, testVersion, testAddress)
		}
		releaseDir = dir
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseDir
}

// serveTLS serves h over HTTPS and returns its URL and the PEM of its
// certificate, for OpenTofu to trust through SSL_CERT_FILE.
func serveTLS(t *testing.T, h http.Handler) (string, []byte) {
	s := httptest.NewTLSServer(h)
	t.Cleanup(s.Close)
	return s.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// registryHandler serves the release in dir by the Provider Registry
// Protocol, as the public registries do: versions, then per platform the
// download document naming the zip, the sums, their signature and the
// public key to check it with. signature is what it serves as the sums'
// signature.
func registryHandler(dir string, signer *Signer, signature []byte) http.Handler {
	sums, sumsErr := ReadSums(filepath.Join(dir, ProviderSums(testVersion)))
	publicKey, keyErr := signer.PublicKey()
	type platform struct {
		OS   string `json:"os"`
		Arch string `json:"arch"`
	}
	var platforms []platform
	for _, p := range Platforms {
		if _, ok := sums[ProviderZip(testVersion, p)]; ok {
			platforms = append(platforms, platform{p.OS, p.Arch})
		}
	}
	mux := http.NewServeMux()
	const base = "/v1/providers/gpuslice/" + ProviderType + "/"
	mux.HandleFunc("GET "+base+"versions", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"versions": []any{map[string]any{
			"version": testVersion, "protocols": []string{protocolVersion}, "platforms": platforms}}})
	})
	mux.HandleFunc("GET "+base+"{version}/download/{os}/{arch}", func(w http.ResponseWriter, r *http.Request) {
		p := Platform{r.PathValue("os"), r.PathValue("arch")}
		zip := ProviderZip(r.PathValue("version"), p)
		sum, ok := sums[zip]
		if !ok || sumsErr != nil || keyErr != nil {
			http.Error(w, fmt.Sprintf("no %s (%v, %v)", zip, sumsErr, keyErr), http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"protocols": []string{protocolVersion}, "os": p.OS, "arch": p.Arch,
			"filename": zip, "download_url": "/files/" + zip, "shasum": sum,
			"shasums_url":           "/files/" + ProviderSums(testVersion),
			"shasums_signature_url": "/signature",
			"signing_keys": map[string]any{"gpg_public_keys": []any{map[string]string{
				"key_id": signer.KeyID(), "ascii_armor": publicKey}}},
		})
	})
	mux.HandleFunc("GET /signature", func(w http.ResponseWriter, r *http.Request) { w.Write(signature) })
	mux.Handle("GET /files/", http.StripPrefix("/files/", http.FileServer(http.Dir(dir))))
	return mux
}

// tofuEnv writes OpenTofu's CLI configuration and the certificates it
// trusts into a new directory and returns the environment naming them.
func tofuEnv(t *testing.T, cliConfig string, certs ...[]byte) []string {
	t.Helper()
	dir := t.TempDir()
	config, certFile := filepath.Join(dir, "cli.tfrc"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(config, []byte(cliConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, bytes.Join(certs, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"TF_CLI_CONFIG_FILE=" + config, "SSL_CERT_FILE=" + certFile}
}

// hostBlock sends the test provider host's registry requests to url.
func hostBlock(url string) string {
	return fmt.Sprintf("host %q {\n  services = {\n    \"providers.v1\" = %q\n  }\n}\n", providerHost, url+"/v1/providers/")
}

// workDir is an OpenTofu configuration requiring the test provider.
func workDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tf := fmt.Sprintf("terraform {\n  required_providers {\n    gpuslice = { source = %q, version = %q }\n  }\n}\n", testAddress, testVersion)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(tf), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
