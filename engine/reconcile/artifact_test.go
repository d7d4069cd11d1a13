package reconcile

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type entry struct {
	name, body, link string
	flag             byte
}

func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.flag, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
		if e.flag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body[:h.Size])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestUntarKeepsInside unpacks what source-controller writes (a root
// entry, directories, regular files) and refuses, naming the entry, what
// would leave the directory or is not a file: parent paths, absolute
// paths, symbolic and hard links, devices; and an archive larger than the
// limit. Nothing is written outside the target.
func TestUntarKeepsInside(t *testing.T) {
	good := tarball(t, entry{name: "./", flag: tar.TypeDir}, entry{name: "stacks/", flag: tar.TypeDir},
		entry{name: "stacks/prod/main.tf", body: "# prod\n", flag: tar.TypeReg})
	dir := filepath.Join(t.TempDir(), "x")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := untar(write(t, good), dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "stacks/prod/main.tf")); err != nil || string(b) != "# prod\n" {
		t.Errorf("stacks/prod/main.tf = %q, %v", b, err)
	}

	outside := t.TempDir()
	for _, c := range []struct {
		entries []entry
		want    string
	}{
		{[]entry{{name: "../escape.tf", body: "x", flag: tar.TypeReg}}, `"../escape.tf" is outside the artifact's root`},
		{[]entry{{name: "a/../../escape.tf", body: "x", flag: tar.TypeReg}}, `"a/../../escape.tf" is outside`},
		{[]entry{{name: filepath.Join(outside, "abs.tf"), body: "x", flag: tar.TypeReg}}, "is outside the artifact's root"},
		{[]entry{{name: "link", link: outside, flag: tar.TypeSymlink}, {name: "link/escape.tf", body: "x", flag: tar.TypeReg}}, `"link" is a symbolic link`},
		{[]entry{{name: "hard", link: "/etc/passwd", flag: tar.TypeLink}}, `"hard" is a hard link`},
		{[]entry{{name: "dev", flag: tar.TypeChar}}, `"dev" is a character device`},
		{[]entry{{name: "big.tf", body: strings.Repeat("x", 4096), flag: tar.TypeReg}}, "unpacks to more than"},
	} {
		dir := filepath.Join(t.TempDir(), "x")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		err := untar(write(t, tarball(t, c.entries...)), dir, 2048)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.entries, err, c.want)
		}
	}
	if left, _ := os.ReadDir(outside); len(left) > 0 || fileExists(filepath.Join(filepath.Dir(dir), "escape.tf")) {
		t.Errorf("files written outside the target: %v", left)
	}
}

// TestDownloadChecksTheDigest keeps a tarball whose bytes match the
// object's digest, and refuses (leaving no file) one that does not, one
// over the size limit, an algorithm it cannot check, and an error status.
func TestDownloadChecksTheDigest(t *testing.T) {
	body := tarball(t, entry{name: "main.tf", body: "# one\n", flag: tar.TypeReg})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gone.tar.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	sum := fmt.Sprintf("sha256:%x", sha256.Sum256(body))
	dir := t.TempDir()
	ctx := context.Background()
	got, err := download(ctx, fluxArtifact{URL: srv.URL + "/a.tar.gz", Digest: sum}, dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, body) {
		t.Errorf("downloaded %d bytes, want the %d served", len(b), len(body))
	}
	os.Remove(got)
	for _, c := range []struct {
		a    fluxArtifact
		max  int64
		want string
	}{
		{fluxArtifact{URL: srv.URL + "/a.tar.gz", Digest: "sha256:" + strings.Repeat("0", 64)}, 1 << 20, "digest mismatch: " + srv.URL + "/a.tar.gz is " + sum},
		{fluxArtifact{URL: srv.URL + "/a.tar.gz", Digest: sum}, 16, "larger than 16 bytes"},
		{fluxArtifact{URL: srv.URL + "/a.tar.gz", Digest: "blake3:00"}, 1 << 20, `status.artifact.digest "blake3:00"`},
		{fluxArtifact{URL: srv.URL + "/gone.tar.gz", Digest: sum}, 1 << 20, "404 Not Found"},
	} {
		if _, err := download(ctx, c.a, dir, c.max); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.a, err, c.want)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("refused downloads left files: %v", left)
	}
}

func write(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "a.tar.gz")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
