package images

import (
	"debug/elf"
	"fmt"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// ReconcileRepository is the in-cluster reconciler's image name (without
// registry): make image-push-reconcile IMAGE=… pushes it.
const ReconcileRepository = "gpuslice/gpuslice-reconcile"

// ReconcileUser is the image's user, and the Deployment's runAsUser: no
// root, and no name to look up in a passwd file the image does not have.
const ReconcileUser = 65532

// caBundle is where Go's crypto/x509 looks first on Linux: the image's
// trust store for cloning over https.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// ReconcileImage is what the in-cluster `gpuslice reconcile` Deployment
// runs: the CLI built without cgo (dir/gpuslice, from `make image`) and
// the CA certificates of the machine building it (caFile), as the
// non-root user ReconcileUser. It writes only to $TMPDIR (/tmp, an
// emptyDir in the Deployment), so its root can be read-only.
func ReconcileImage(dir, caFile, version, revision string) (v1.Image, error) {
	bin := filepath.Join(dir, "gpuslice")
	f, err := elf.Open(bin)
	if err != nil {
		return nil, missing(err, "make image")
	}
	static := f.Section(".interp") == nil
	f.Close()
	if !static {
		return nil, fmt.Errorf("%s is dynamically linked: the reconcile image has no C library; build it with CGO_ENABLED=0 (make image)", bin)
	}
	layer, err := Layer([]File{
		{Path: "/usr/local/bin/gpuslice", Source: bin, Mode: 0o755},
		{Path: caBundle, Source: caFile, Mode: 0o644},
	})
	if err != nil {
		return nil, missing(err, "make image")
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "gpuslice-reconcile",
		"org.opencontainers.image.description": "gpuslice reconcile: applies a stack from a Git repository on a loop, in the cluster",
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
	}
	user := fmt.Sprintf("%d:%d", ReconcileUser, ReconcileUser)
	img, err := Build(v1.Config{
		Entrypoint: []string{"/usr/local/bin/gpuslice", "reconcile"},
		User:       user,
		Env:        []string{"TMPDIR=/tmp", "HOME=/tmp"},
		Labels:     labels,
	}, layer)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}
