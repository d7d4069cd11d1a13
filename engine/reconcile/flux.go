package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// FluxGroup is the API group of Flux's sources; v1 is the version
// source-controller v1.x serves GitRepository and OCIRepository in.
const FluxGroup = "source.toolkit.fluxcd.io"

// fluxKinds are the Flux sources a reconcile reads: kind and resource.
var fluxKinds = map[string]string{"GitRepository": "gitrepositories", "OCIRepository": "ocirepositories"}

// Flux is a Flux source (GitRepository or OCIRepository) whose artifact,
// the tarball source-controller makes of each revision and serves over
// HTTP, the loop downloads, checks against the object's digest and
// extracts into WorkDir. Flux does the fetching, authentication and
// verification of the origin; gpuslice only reads the object.
type Flux struct {
	Client dynamic.Interface
	// Kind is GitRepository or OCIRepository.
	Kind            string
	Namespace, Name string
	// Path is the configuration's directory inside the artifact.
	Path string
	// WorkDir holds the extracted artifact; it is created when missing.
	WorkDir string
	// MaxSize bounds the download and the extracted files, each; 0 means
	// DefaultMaxArtifactSize.
	MaxSize int64

	// current is the artifact extracted last, reused while the object's
	// digest stays the same.
	current *extraction
}

// DefaultMaxArtifactSize bounds an artifact: a stack's HCL is kilobytes,
// and a repository holding more than this is not a configuration.
const DefaultMaxArtifactSize = 256 << 20

type extraction struct {
	digest, revision, root string
	time                   time.Time
}

// ParseFluxSource reads kind/namespace/name, the kind as kubectl spells
// it (gitrepository, gitrepositories, GitRepository; the same for
// ocirepository).
func ParseFluxSource(s string) (kind, namespace, name string, err error) {
	parts := strings.Split(s, "/")
	if len(parts) == 3 && parts[1] != "" && parts[2] != "" {
		for k, res := range fluxKinds {
			if l := strings.ToLower(parts[0]); l == strings.ToLower(k) || l == res {
				return k, parts[1], parts[2], nil
			}
		}
	}
	return "", "", "", fmt.Errorf("flux source %q: write kind/namespace/name, the kind gitrepository or ocirepository, e.g. gitrepository/flux-system/gpu-stacks", s)
}

func (f *Flux) String() string {
	s := f.Kind + " " + f.Namespace + "/" + f.Name
	if c := filepath.Clean(f.Path); c != "." {
		s += ":" + c
	}
	return s
}

func (f *Flux) object() string { return f.Kind + " " + f.Namespace + "/" + f.Name }

// fluxArtifact is a source's status.artifact.
type fluxArtifact struct {
	URL, Revision, Digest string
	LastUpdateTime        time.Time
}

// Fetch reads the object's artifact and, when it is not the one extracted
// last, downloads, checks and extracts it.
func (f *Flux) Fetch(ctx context.Context) (Revision, error) {
	path := filepath.Clean(f.Path)
	if path != "." && !filepath.IsLocal(path) {
		return Revision{}, fmt.Errorf("path %q of %s: name a directory inside the artifact, relative to its root", f.Path, f.object())
	}
	a, err := f.artifact(ctx)
	if err != nil {
		return Revision{}, err
	}
	if f.current == nil || f.current.digest != a.Digest {
		x, err := f.extract(ctx, a)
		if err != nil {
			return Revision{ID: a.Revision, Time: a.LastUpdateTime}, err
		}
		f.current = x
	}
	x := f.current
	rev := Revision{ID: x.revision, Dir: filepath.Join(x.root, path), Root: x.root, Time: x.time}
	if info, err := os.Stat(rev.Dir); err != nil || !info.IsDir() {
		return Revision{ID: x.revision, Time: x.time}, fmt.Errorf("path %q is not a directory in the artifact of %s at revision %s: fix the path, or the source's spec (ignore, include, layerSelector)", f.Path, f.object(), x.revision)
	}
	return rev, nil
}

// artifact reads status.artifact of the object.
func (f *Flux) artifact(ctx context.Context) (fluxArtifact, error) {
	res, ok := fluxKinds[f.Kind]
	if !ok {
		return fluxArtifact{}, fmt.Errorf("flux source kind %q: gpuslice reads GitRepository or OCIRepository", f.Kind)
	}
	gvr := schema.GroupVersionResource{Group: FluxGroup, Version: "v1", Resource: res}
	u, err := f.Client.Resource(gvr).Namespace(f.Namespace).Get(ctx, f.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fluxArtifact{}, fmt.Errorf("%s not found (or Flux's %s CRD is not installed): create it, or name one that `kubectl get %s -A` lists: %w", f.object(), res, res, err)
	case apierrors.IsForbidden(err):
		return fluxArtifact{}, fmt.Errorf("reading %s is forbidden: grant get on %s.%s to this reconcile's ServiceAccount: %w", f.object(), res, FluxGroup, err)
	case err != nil:
		return fluxArtifact{}, fmt.Errorf("read %s: %w", f.object(), err)
	}
	// Not NestedStringMap: the artifact has a number (size) too.
	m, _, _ := unstructured.NestedMap(u.Object, "status", "artifact")
	str := func(k string) string { s, _ := m[k].(string); return s }
	if str("url") == "" {
		return fluxArtifact{}, fmt.Errorf("%s has no artifact yet (%s): wait for source-controller, or see `kubectl describe %s -n %s %s`", f.object(), readyCondition(u), strings.ToLower(f.Kind), f.Namespace, f.Name)
	}
	a := fluxArtifact{URL: str("url"), Revision: str("revision"), Digest: str("digest")}
	if t, err := time.Parse(time.RFC3339, str("lastUpdateTime")); err == nil {
		a.LastUpdateTime = t
	}
	if a.Digest == "" || a.Revision == "" {
		return fluxArtifact{}, fmt.Errorf("%s: status.artifact has no digest or revision (%v): gpuslice reads source-controller v1 artifacts, which have both", f.object(), m)
	}
	return a, nil
}

// readyCondition says what the object's Ready condition says.
func readyCondition(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return fmt.Sprintf("Ready is %v: %v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return "no Ready condition yet: is source-controller running?"
}

// extract downloads a into a new directory of WorkDir and, once it is
// complete, removes the one extracted before.
func (f *Flux) extract(ctx context.Context, a fluxArtifact) (*extraction, error) {
	if err := os.MkdirAll(f.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("make the artifact directory %s: %w", f.WorkDir, err)
	}
	if f.current == nil {
		// What a previous process extracted is taken from scratch: it
		// may be half-written.
		old, _ := filepath.Glob(filepath.Join(f.WorkDir, "artifact-*"))
		for _, o := range old {
			os.RemoveAll(o)
		}
	}
	max := f.MaxSize
	if max <= 0 {
		max = DefaultMaxArtifactSize
	}
	tarball, err := download(ctx, a, f.WorkDir, max)
	if err != nil {
		return nil, fmt.Errorf("artifact of %s at revision %s: %w", f.object(), a.Revision, err)
	}
	defer os.Remove(tarball)
	root, err := os.MkdirTemp(f.WorkDir, "artifact-")
	if err != nil {
		return nil, fmt.Errorf("make a directory for the artifact in %s: %w", f.WorkDir, err)
	}
	if err := untar(tarball, root, max); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("artifact of %s at revision %s (%s): %w", f.object(), a.Revision, a.URL, err)
	}
	if f.current != nil {
		os.RemoveAll(f.current.root)
	}
	return &extraction{digest: a.Digest, revision: a.Revision, root: root, time: a.LastUpdateTime}, nil
}
