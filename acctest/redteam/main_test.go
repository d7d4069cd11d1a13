// Package redteam attacks gpuslice's isolation as a hostile tenant would,
// on real nodes (kubelet, containerd, runc, the node plugin and the shim;
// only the GPU silicon is simulated). Every attack runs from inside a
// tenant namespace or a tenant's container and must end refused (with a
// reason the tenant can act on) or contained (the slice held, or the
// process over it stopped, and the other tenant's claim untouched). The
// suite prints a table: attack, layer, expected, outcome.
package redteam

import (
	"fmt"
	"os"
	"testing"

	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// gpusliceCLI is the CLI built for the suite: the platform team applies
// the stack the way users do.
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
	// A GPU serves one kind of slice at a time: partitions on red-node's
	// one GPU, where red's attacks share the GPU with blue's victim; the
	// any-size and time-sliced devices on shared-node's two GPUs, where
	// the attacks with admission off meet neighbours of their kind.
	code := realnodetest.Main(m, realnodetest.Options{
		Names: []string{partitionNode, sharedNode}, GPUs: "v100-32gb:1",
		NodeGPUs:       map[string]string{sharedNode: "v100-32gb:2"},
		NodePluginArgs: map[string][]string{sharedNode: {"--fractions=", "--any-size=true", "--time-slicing=true"}},
	})
	table.print(os.Stdout)
	return code
}
