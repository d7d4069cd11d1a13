package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/shim"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// NodePlugin is where a simulated node's plugin keeps its files: a kubelet
// stand-in (package nodeplugin/internal/kubeletsim) dials Socket to prepare claims.
type NodePlugin struct {
	Node          string `json:"node"`
	Socket        string `json:"socket"`
	CDIDir        string `json:"cdiDir"`
	AccountingDir string `json:"accountingDir"`
	StateDir      string `json:"stateDir"`
}

// SimulatedGPU is what every dev node carries: one V100-PCIE-32GB.
var SimulatedGPU = simulate.Spec{Profile: "v100-32gb", Count: 1}

// startNodePlugin runs the node plugin in this process for a simulated
// node, with all its state under dir/nodes/<node>.
func startNodePlugin(ctx context.Context, c *cluster.Cluster, dir, binDir, node string) (*driver.Plugin, NodePlugin, error) {
	lib := filepath.Join(binDir, "shim", shim.LibraryFile)
	if _, err := os.Stat(lib); err != nil {
		return nil, NodePlugin{}, fmt.Errorf("node plugin of %s needs the shim library %s: build it with `make shim`", node, lib)
	}
	n, err := c.Client().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, NodePlugin{}, fmt.Errorf("node plugin of %s: %w", node, err)
	}
	cfg := driver.LocalDirs(driver.Config{SimulatedGPUs: true,
		NodeName: node, NodeUID: n.UID, Client: c.Client(),
		NVML: simulate.New(SimulatedGPU, node), Publish: publish.Options{Fractions: contract.DefaultFractions},
		DriverRoot: filepath.Join(dir, "nodes", node, "driver-root"), ShimSource: lib,
		Logger: klog.Background().WithValues("node", node),
	}, filepath.Join(dir, "nodes", node))
	p, err := driver.Start(ctx, cfg)
	if err != nil {
		return nil, NodePlugin{}, fmt.Errorf("node plugin of %s: %w", node, err)
	}
	return p, NodePlugin{Node: node, Socket: cfg.SocketPath(), CDIDir: cfg.CDIDir, AccountingDir: cfg.AccountingRoot, StateDir: cfg.StateDir}, nil
}
