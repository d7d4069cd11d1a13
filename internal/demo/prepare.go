package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/devcluster"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/kubeletsim"
	"github.com/gpuslice/gpuslice/nodeplugin/shim"
)

// prepare does what the kubelet does when the claim's pod starts on its
// node (simulated nodes have none): NodePrepareResources on the node
// plugin's socket. It returns the CDI spec the plugin wrote.
func prepare(ctx context.Context, state *devcluster.State, claim *resourcev1.ResourceClaim) (*specs.Spec, string, error) {
	node := claim.Status.Allocation.Devices.Results[0].Pool
	var plugin *devcluster.NodePlugin
	for i := range state.NodePlugins {
		if state.NodePlugins[i].Node == node {
			plugin = &state.NodePlugins[i]
		}
	}
	if plugin == nil {
		return nil, "", fmt.Errorf("no node plugin serves node %s", node)
	}
	kubelet, err := kubeletsim.Dial(plugin.Socket)
	if err != nil {
		return nil, "", err
	}
	defer kubelet.Close()
	ids, err := kubelet.Prepare(ctx, claim)
	if err != nil {
		return nil, "", err
	}
	fmt.Printf("     NodePrepareResources on %s → CDI device %s\n", node, strings.Join(ids[string(claim.UID)], ", "))
	path := filepath.Join(plugin.CDIDir, cdispec.SpecName(string(claim.UID)))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read the CDI spec the plugin wrote: %w", err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return &spec, path, nil
}

func showSpec(spec *specs.Spec, path string) {
	fmt.Printf("     %s\n", path)
	edits := spec.Devices[0].ContainerEdits
	fmt.Printf("       env:\n")
	for _, e := range edits.Env {
		fmt.Printf("         %s\n", e)
	}
	fmt.Printf("       mounts:\n")
	for _, m := range edits.Mounts {
		if strings.HasPrefix(m.ContainerPath, "/usr/lib") || strings.HasPrefix(m.ContainerPath, "/usr/bin") {
			continue // driver files: none on a simulated node
		}
		fmt.Printf("         %-40s → %s (%s)\n", m.HostPath, m.ContainerPath, strings.Join(m.Options, ","))
	}
	var nodes []string
	for _, d := range edits.DeviceNodes {
		nodes = append(nodes, d.Path)
	}
	fmt.Printf("       device nodes: %s\n", strings.Join(nodes, " "))
}

// nvidiaSMI runs gpuslice-smi as a process of the claim's container would:
// the shim preloaded with the spec's environment and accounting directory,
// against the simulated V100 driver the shim's tests use (bin/shim/fake).
func nvidiaSMI(binDir string, spec *specs.Spec, work string) (string, error) {
	edits := spec.Devices[0].ContainerEdits
	env := []string{"PATH=" + os.Getenv("PATH"),
		"LD_PRELOAD=" + filepath.Join(binDir, "shim", shim.LibraryFile),
		"LD_LIBRARY_PATH=" + filepath.Join(binDir, "shim", "fake"),
		"FAKEGPU_STATE=" + filepath.Join(work, "fakegpu")}
	for _, e := range edits.Env {
		if !strings.HasPrefix(e, contract.EnvAccountingDir+"=") {
			env = append(env, e)
		}
	}
	for _, m := range edits.Mounts {
		if m.ContainerPath == contract.ContainerAccountingDir {
			env = append(env, contract.EnvAccountingDir+"="+m.HostPath)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "shim", "gpuslice-smi"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("gpuslice-smi: %w\n%s", err, out)
	}
	return string(out), nil
}
