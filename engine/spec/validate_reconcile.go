package spec

import (
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/util/validation"
)

// reconcileNamePrefix names the reconciler's objects (gpuslice-reconcile-
// <stack>): the stack must leave room for it in a 63-character name.
const reconcileNamePrefix = "gpuslice-reconcile-"

// reconcile checks the platform's reconcile block.
func (v *validator) reconcile(addr string, rc *Reconcile) {
	u, err := url.Parse(rc.GitURL)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		v.errorf(addr, "reconcile.git_url", "Invalid Git URL", "%q: give the repository's https:// (or http://) clone URL, e.g. https://git.example.com/platform/gpu-stacks.git", rc.GitURL)
	case u.User != nil:
		v.errorf(addr, "reconcile.git_url", "Credentials in the Git URL", "the URL's user information would be readable by anyone who may read the Deployment; give the URL without it (private repositories are not supported yet)")
	}
	if rc.Ref == "" || strings.ContainsFunc(rc.Ref, func(r rune) bool { return r <= ' ' }) {
		v.errorf(addr, "reconcile.ref", "Invalid ref", "%q: give a branch, tag or commit hash, e.g. \"main\"", rc.Ref)
	}
	if c := filepath.Clean(rc.Path); c != "." && !filepath.IsLocal(c) {
		v.errorf(addr, "reconcile.path", "Path outside the repository", "%q: give the configuration's directory relative to the repository's root, e.g. \"stacks/prod\"", rc.Path)
	}
	if errs := validation.IsDNS1123Label(reconcileNamePrefix + rc.Stack); len(errs) > 0 || rc.Stack == "" {
		v.errorf(addr, "reconcile.stack", "Invalid stack name", "%q: the reconciler's objects are named %s<stack>, so give lower-case letters, digits and '-' (at most %d characters)",
			rc.Stack, reconcileNamePrefix, validation.DNS1123LabelMaxLength-len(reconcileNamePrefix))
	}
	if d, err := time.ParseDuration(rc.Interval); err != nil || d < time.Second {
		v.errorf(addr, "reconcile.interval", "Invalid interval", "%q: give a Go duration of at least 1s, e.g. \"30s\" or \"5m\"", rc.Interval)
	}
	if _, err := name.ParseReference(rc.Image); err != nil {
		v.errorf(addr, "reconcile.image", "Invalid image reference", "%q: %v; write registry/repository:tag@sha256:…, as `make image-push-reconcile` prints it", rc.Image, err)
	} else if !strings.Contains(rc.Image, "@sha256:") {
		v.warningf(addr, "reconcile.image", "Image not pinned by digest", "%q can change under the same tag; pin it with @sha256:… (`make image-push-reconcile` prints the digest)", rc.Image)
	}
}
