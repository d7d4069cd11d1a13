package reconcile_test

import (
	"context"
	"os"
	"testing"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

func TestMain(m *testing.M) {
	os.Exit(clustertest.Main(m, cluster.Options{}, func(c *cluster.Cluster) error {
		_, err := c.AddNode(context.Background(), cluster.NodeSpec{Name: "gpu-node-1"})
		return err
	}))
}
