// Package incluster runs gpuslice reconcile the way a GitOps team runs it
// in the cluster: the chart's reconcile Deployment, installed as the guide
// "Reconciling from Git" says, on real nodes (kubelet, containerd, runc),
// from the image `make image` builds, with only the runner's role and no
// kubeconfig, following a repository on a Git server of this machine.
package incluster

import (
	"os"
	"testing"

	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

func TestMain(m *testing.M) {
	// The chart runs the node plugin too, as a DaemonSet pod.
	os.Exit(realnodetest.Main(m, realnodetest.Options{Names: []string{"gitops-1"}, NoNodePlugin: true}))
}
