package reconcile

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// digests are the algorithms source-controller's --artifact-digest-algo
// offers that the standard library has (not blake3).
var digests = map[string]func() hash.Hash{"sha256": sha256.New, "sha384": sha512.New384, "sha512": sha512.New}

// artifactClient bounds a download, so that a stalled artifact server
// fails the round instead of stopping the loop.
var artifactClient = &http.Client{Timeout: 5 * time.Minute}

// download fetches a's URL into a file of dir, at most max bytes, and
// checks it against a's digest before anything reads it: a tarball
// changed in source-controller's storage or in transit is refused.
func download(ctx context.Context, a fluxArtifact, dir string, max int64) (string, error) {
	algo, want, _ := strings.Cut(a.Digest, ":")
	newHash, ok := digests[algo]
	if !ok {
		return "", fmt.Errorf("status.artifact.digest %q: gpuslice checks sha256, sha384 or sha512 digests; run source-controller with --artifact-digest-algo=sha256 (its default)", a.Digest)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
	if err != nil {
		return "", fmt.Errorf("status.artifact.url %q: %w", a.URL, err)
	}
	resp, err := artifactClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("download %s (can this pod reach source-controller? Flux's default NetworkPolicies admit only its own namespace): %w", a.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download %s: %s (source-controller serves only the newest artifact: the next round reads the object again)", a.URL, resp.Status)
	}
	f, err := os.CreateTemp(dir, "download-*.tar.gz")
	if err != nil {
		return "", fmt.Errorf("make a file for the artifact in %s: %w", dir, err)
	}
	h := newHash()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, max+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		err = fmt.Errorf("download %s: %w", a.URL, err)
	case n > max:
		err = fmt.Errorf("download %s: larger than %d bytes, the most a reconcile takes", a.URL, max)
	case hex.EncodeToString(h.Sum(nil)) != want:
		err = fmt.Errorf("digest mismatch: %s is %s:%x, status.artifact.digest says %s: refusing it (changed in source-controller's storage or in transit); the cluster stays at the last revision applied",
			a.URL, algo, h.Sum(nil), a.Digest)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

var errTooLarge = errors.New("the artifact unpacks to more than the most a reconcile takes")

// capped reads at most n bytes, then fails with errTooLarge.
type capped struct {
	r io.Reader
	n int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// untar unpacks the gzipped tarball file into dir, which must be new and
// empty: regular files and directories only, each inside dir (os.Root
// refuses any other), at most max bytes of tar stream in all.
func untar(file, dir string, max int64) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("not a gzipped tarball: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(&capped{r: gz, n: max})
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the tarball: %w", err)
		}
		if err := unpack(root, tr, h); err != nil {
			return err
		}
	}
}

func unpack(root *os.Root, tr *tar.Reader, h *tar.Header) error {
	name := filepath.Clean(filepath.FromSlash(h.Name))
	if h.Typeflag == tar.TypeXGlobalHeader || name == "." {
		return nil
	}
	if !filepath.IsLocal(name) {
		return fmt.Errorf("tarball entry %q is outside the artifact's root: refusing the artifact", h.Name)
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o700); err != nil {
			return fmt.Errorf("tarball entry %q: %w", h.Name, err)
		}
		return nil
	case tar.TypeReg:
		if err := root.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			return fmt.Errorf("tarball entry %q: %w", h.Name, err)
		}
		out, err := root.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("tarball entry %q: %w", h.Name, err)
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("tarball entry %q: %w", h.Name, err)
		}
		return nil
	}
	kind, ok := entryKinds[h.Typeflag]
	if !ok {
		kind = fmt.Sprintf("entry of type %q", h.Typeflag)
	}
	return fmt.Errorf("tarball entry %q is a %s: an artifact the reconcile reads holds regular files and directories only", h.Name, kind)
}

var entryKinds = map[byte]string{tar.TypeSymlink: "symbolic link", tar.TypeLink: "hard link", tar.TypeChar: "character device",
	tar.TypeBlock: "block device", tar.TypeFifo: "FIFO"}
