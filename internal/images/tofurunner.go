package images

import (
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpuslice/gpuslice/internal/localregistry"
)

// TofuRunner is the reference of the OpenTofu runner image.
const TofuRunner = localregistry.Host + "/tofu-runner:1"

// RunnerUser is the user a GitOps runner (tofu-controller's tf-runner)
// runs as: distroless's nonroot, which no file of the image belongs to.
const RunnerUser = 65532

// TofuRunnerImage is what a GitOps runner pod runs OpenTofu from: bin/tofu
// (statically linked: the image has no C library, no shell, nothing else)
// and caBundle as the system's trusted certificates, which Go reads at
// /etc/ssl/certs/ca-certificates.crt. It runs as RunnerUser in /work,
// which the pod mounts writable (its root file system is read-only).
func TofuRunnerImage(binDir, caBundle string) (v1.Image, error) {
	layer, err := Layer([]File{
		{Path: "/usr/local/bin/tofu", Source: filepath.Join(binDir, "tofu"), Mode: 0o755},
		{Path: "/etc/ssl/certs/ca-certificates.crt", Source: caBundle, Mode: 0o644},
	})
	if err != nil {
		return nil, missing(err, "make tools")
	}
	return Build(v1.Config{
		Env:        []string{"PATH=/usr/local/bin", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"},
		Entrypoint: []string{"/usr/local/bin/tofu"},
		User:       "65532:65532",
		WorkingDir: "/work",
	}, layer)
}
