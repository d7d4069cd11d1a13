// Package nodes proves the node half of gpuslice on real nodes: a real
// kubelet, containerd and runc run the slices' containers, with the node
// plugin preparing their claims and the shim enforcing the slice inside,
// against the simulated V100 of package realnode (only the GPU silicon and
// its driver are simulated).
package nodes

import (
	"fmt"
	"os"
	"testing"

	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// gpusliceCLI is the CLI built for these tests: workloads reach the nodes
// the way users apply them.
var gpusliceCLI string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	cli, remove, err := realnodetest.BuildCLI()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	gpusliceCLI = cli
	// Every kind of slice: partitions, any-size and time-sliced devices.
	return realnodetest.Main(m, realnodetest.Options{Names: []string{"real-1"}, PluginArgs: []string{"--any-size=true", "--time-slicing=true"}})
}
