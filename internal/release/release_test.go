package release

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
)

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"0.1.0", "1.20.3", "0.2.0-rc.1"} {
		if err := CheckVersion(v); err != nil {
			t.Errorf("CheckVersion(%q): %v", v, err)
		}
	}
	for _, v := range []string{"", "v0.1.0", "0.1", "0.1.0+build.7", "latest"} {
		if err := CheckVersion(v); err == nil {
			t.Errorf("CheckVersion(%q) accepted a version OpenTofu or an OCI tag cannot carry", v)
		}
	}
}

// A zip's bytes depend only on what it holds: not on when it was written
// nor on the mode the built file happened to have.
func TestZipDependsOnlyOnContent(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "bin")
	os.WriteFile(src, []byte("provider bytes"), 0o600)
	writeZip(filepath.Join(dir, "a.zip"), "terraform-provider-gpuslice_v0.1.0", src)
	os.Chmod(src, 0o755)
	os.Chtimes(src, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if err := writeZip(filepath.Join(dir, "b.zip"), "terraform-provider-gpuslice_v0.1.0", src); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a.zip"))
	b, _ := os.ReadFile(filepath.Join(dir, "b.zip"))
	if !bytes.Equal(a, b) {
		t.Fatal("two zips of the same file differ")
	}
	r, err := zip.NewReader(bytes.NewReader(a), int64(len(a)))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.File) != 1 {
		t.Fatalf("zip holds %d files, want the executable alone", len(r.File))
	}
	f := r.File[0]
	if f.Name != "terraform-provider-gpuslice_v0.1.0" || f.Mode() != 0o755 || !f.Modified.Equal(zipTime) {
		t.Errorf("entry %s mode %v time %v, want terraform-provider-gpuslice_v0.1.0 -rwxr-xr-x %v", f.Name, f.Mode(), f.Modified, zipTime)
	}
}

func TestNamesAreTheRegistries(t *testing.T) {
	win := Platform{"windows", "arm64"}
	for got, want := range map[string]string{
		ProviderZip("0.1.0", win):                   "terraform-provider-gpuslice_0.1.0_windows_arm64.zip",
		providerExecutable("0.1.0", win):            "terraform-provider-gpuslice_v0.1.0.exe",
		providerExecutable("0.1.0", Host()):         "terraform-provider-gpuslice_v0.1.0" + Host().exe(),
		ProviderSums("0.1.0"):                       "terraform-provider-gpuslice_0.1.0_SHA256SUMS",
		SignatureOf(ProviderSums("0.1.0")):          "terraform-provider-gpuslice_0.1.0_SHA256SUMS.sig",
		ProviderManifest("0.1.0"):                   "terraform-provider-gpuslice_0.1.0_manifest.json",
		CLIZip("0.1.0", Platform{"linux", "amd64"}): "gpuslice_0.1.0_linux_amd64.zip",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

// The signature verifies with the public key a registry would hand out,
// and only over the sums it was made for.
func TestSignatureVerifies(t *testing.T) {
	s := newSigner(t, false)
	dir := t.TempDir()
	sums := filepath.Join(dir, "SUMS")
	os.WriteFile(sums, []byte(strings.Repeat("0", 64)+"  a.zip\n"), 0o644)
	if err := s.signFile(sums); err != nil {
		t.Fatal(err)
	}
	pub, err := s.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	keyring, err := openpgp.ReadArmoredKeyRing(strings.NewReader(pub))
	if err != nil {
		t.Fatal(err)
	}
	if keyring[0].PrivateKey != nil {
		t.Fatal("PublicKey exported the private key")
	}
	data, _ := os.ReadFile(sums)
	sig, _ := os.ReadFile(SignatureOf(sums))
	if _, err := openpgp.CheckDetachedSignature(keyring, bytes.NewReader(data), bytes.NewReader(sig), nil); err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	data[0] = '1'
	if _, err := openpgp.CheckDetachedSignature(keyring, bytes.NewReader(data), bytes.NewReader(sig), nil); err == nil {
		t.Fatal("signature verified over changed sums")
	}
}

func TestEncryptedKeyNeedsItsPassphrase(t *testing.T) {
	e, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := openpgp.ReadArmoredKeyRing(strings.NewReader(armorPrivate(t, e)))
	if err != nil {
		t.Fatal(err)
	}
	if err := keys[0].EncryptPrivateKeys([]byte("s3cret"), nil); err != nil {
		t.Fatal(err)
	}
	encrypted := armorPrivate(t, keys[0])
	if _, err := NewSigner(encrypted, nil); err == nil || !strings.Contains(err.Error(), PassphraseEnv) {
		t.Errorf("encrypted key without a passphrase: got %v, want an error naming %s", err, PassphraseEnv)
	}
	if _, err := NewSigner(encrypted, []byte("wrong")); err == nil {
		t.Error("encrypted key decrypted with a wrong passphrase")
	}
	t.Setenv(KeyEnv, encrypted)
	t.Setenv(PassphraseEnv, "s3cret")
	s, err := SignerFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyID() != strings.ToUpper(e.PrimaryKey.KeyIdString()) {
		t.Errorf("key ID %s, want %s", s.KeyID(), e.PrimaryKey.KeyIdString())
	}
	t.Setenv(KeyEnv, "")
	if _, err := SignerFromEnv(); err == nil || !strings.Contains(err.Error(), KeyEnv) {
		t.Errorf("no key: got %v, want an error naming %s", err, KeyEnv)
	}
}

// A SOURCE_DATE_EPOCH that is not a Unix time is refused, naming it.
func TestSourceDateEpochChecked(t *testing.T) {
	key, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(KeyEnv, armorPrivate(t, key))
	t.Setenv(SourceDateEpochEnv, "yesterday")
	if _, err := SignerFromEnv(); err == nil || !strings.Contains(err.Error(), SourceDateEpochEnv+` is "yesterday"`) {
		t.Errorf("SignerFromEnv with a bad %s: %v", SourceDateEpochEnv, err)
	}
}
