// Package reconcile is `gpuslice reconcile`: a loop that reads a stack's
// configuration from a source (a directory, a Git repository it clones
// itself, or a Flux source's artifact), plans it against the cluster and
// applies any difference under the stack's lock, reporting each round in a
// status ConfigMap, Events and Prometheus metrics.
package reconcile

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuslice/gpuslice/engine/diag"
)

// Revision is one version of the configuration, ready to load.
type Revision struct {
	// ID names the version: a Git commit's hash, a Flux artifact's
	// revision (main@sha1:…, v1@sha256:…); "" for a directory, which has
	// no versions.
	ID string
	// Dir holds the configuration's files.
	Dir string
	// Root is the repository's checkout (or the extracted artifact) that
	// Dir is in: diagnostics name files relative to it, as the repository
	// does. "" for a directory.
	Root string
	// Time is when the configuration last changed: the commit's time, the
	// artifact's lastUpdateTime, or the directory's newest configuration
	// file.
	Time time.Time
}

// relative names diagnostics' files relative to Root.
func (rev Revision) relative(ds diag.Diagnostics) {
	if rev.Root == "" {
		return
	}
	for i, d := range ds {
		if d.Range == nil {
			continue
		}
		if rel, err := filepath.Rel(rev.Root, d.Range.Filename); err == nil && filepath.IsLocal(rel) {
			r := *d.Range
			r.Filename = rel
			ds[i].Range = &r
		}
	}
}

// Source gives the configuration's current revision each round.
type Source interface {
	Fetch(ctx context.Context) (Revision, error)
	// String names the source in messages and in the status.
	String() string
}

// Dir is a directory that something else keeps up to date (a Git sync
// sidecar, a person).
type Dir string

func (d Dir) Fetch(context.Context) (Revision, error) {
	return Revision{Dir: string(d), Time: ConfigTime(string(d))}, nil
}

func (d Dir) String() string {
	if abs, err := filepath.Abs(string(d)); err == nil {
		return abs
	}
	return string(d)
}

// ConfigTime is when the configuration in dir last changed: its newest
// .tf, .tf.json or .tfvars file's modification time.
func ConfigTime(dir string) time.Time {
	var newest time.Time
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if n := d.Name(); strings.HasSuffix(n, ".tf") || strings.HasSuffix(n, ".tf.json") || strings.HasSuffix(n, ".tfvars") {
			if info, err := d.Info(); err == nil && info.ModTime().After(newest) {
				newest = info.ModTime()
			}
		}
		return nil
	})
	return newest
}
