package release

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/gpuslice/gpuslice/internal/testenv"
)

// Two releases of the same source, signed at the same SOURCE_DATE_EPOCH,
// are the same bytes, file for file, signatures included, and the
// signatures verify. It builds this machine's platform only; make release
// builds them all the same way.
func TestReleaseIsReproducible(t *testing.T) {
	testenv.Short(t, "builds the provider and the CLI twice")
	mod := moduleDir(t)
	key, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	// as make release reads them
	t.Setenv(KeyEnv, armorPrivate(t, key))
	t.Setenv(SourceDateEpochEnv, strconv.FormatInt(time.Now().Unix(), 10))
	signer, err := SignerFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	var dirs [2]string
	for i := range dirs {
		dirs[i] = filepath.Join(t.TempDir(), testVersion)
		err := Make(context.Background(), Options{ModuleDir: mod, Version: testVersion, Address: "providers.gpuslice.test/gpuslice/gpuslice",
			Platforms: []Platform{Host()}, Out: dirs[i], Signer: signer})
		if err != nil {
			t.Fatal(err)
		}
	}
	files := 0
	err = filepath.WalkDir(dirs[0], func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dirs[0], path)
		a, _ := os.ReadFile(path)
		b, err := os.ReadFile(filepath.Join(dirs[1], rel))
		if err != nil {
			t.Errorf("second release lacks %s", rel)
			return nil
		}
		files++
		if strings.HasSuffix(rel, ".sig") {
			verifySignature(t, strings.TrimSuffix(path, ".sig"))
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two releases of the same source", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// two zips, two sums, two signatures, the manifest, and the mirror's
	// index, version document and zip
	if files != 10 {
		t.Errorf("release holds %d files, want 10", files)
	}
	checkCLI(t, filepath.Join(dirs[0], CLIZip(testVersion, Host())))
}

func verifySignature(t *testing.T, sums string) {
	t.Helper()
	e, _ := testKey()
	data, _ := os.ReadFile(sums)
	sig, _ := os.ReadFile(SignatureOf(sums))
	if _, err := openpgp.CheckDetachedSignature(openpgp.EntityList{e}, bytes.NewReader(data), bytes.NewReader(sig), nil); err != nil {
		t.Errorf("signature of %s: %v", filepath.Base(sums), err)
	}
}

// checkCLI unpacks the CLI, checks that it is static where it can tell
// (no ELF interpreter: it runs in images without a libc) and that it
// reports the release's version.
func checkCLI(t *testing.T, zipPath string) {
	t.Helper()
	r, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	in, err := r.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), r.File[0].Name)
	out, _ := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	io.Copy(out, in)
	out.Close()
	if f, err := elf.Open(bin); err == nil {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked (it has an ELF interpreter)", r.File[0].Name)
			}
		}
		f.Close()
	}
	got, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), testVersion) {
		t.Errorf("%s --version: %v, %q; want the release's version %s", r.File[0].Name, err, got, testVersion)
	}
}
