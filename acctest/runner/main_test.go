// Package runner runs OpenTofu the way GitOps runners do (Flux's
// tofu-controller's runner pod): in a pod on real nodes, as a non-root
// user with a read-only root file system, with a ServiceAccount and no
// kubeconfig, the provider installed from the release's OCI artifacts and
// the state in OpenTofu's own kubernetes backend.
package runner

import (
	"os"
	"testing"

	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

func TestMain(m *testing.M) {
	os.Exit(realnodetest.Main(m, realnodetest.Options{Names: []string{"runner-1"}}))
}
