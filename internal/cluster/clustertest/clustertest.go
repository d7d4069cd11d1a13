// Package clustertest starts the local control plane (package cluster) for
// Go tests, once per test or once per package from TestMain.
package clustertest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// Start starts a control plane for tb and stops it when tb ends, printing
// every component's log tail if tb failed. See RequireTools for when it
// skips.
func Start(tb testing.TB, opts cluster.Options) *cluster.Cluster {
	tb.Helper()
	RequireTools(tb)
	c, err := cluster.Start(context.Background(), opts)
	if err != nil {
		tb.Fatalf("start control plane: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("control plane logs:\n%s", c.LogTails(40))
		}
		c.Stop()
	})
	return c
}

// RequireTools skips tb under -short, and when the control-plane tools are
// not built outside CI; in CI (CI=true) a missing tool fails tb instead, so a
// broken build can never pass by skipping.
func RequireTools(tb testing.TB) {
	tb.Helper()
	testenv.Short(tb, "needs the local control plane")
	if err := ToolsBuilt(); err != nil {
		testenv.Unavailable(tb, "%v", err)
	}
}

func ToolsBuilt() error {
	binDir := cluster.FindBinDir()
	for _, name := range []string{cluster.Etcd, cluster.KubeAPIServer, cluster.KubeScheduler, cluster.KubeControllerManager} {
		if _, err := cluster.ToolPath(binDir, name); err != nil {
			return err
		}
	}
	return nil
}

// Main runs a test binary's tests against one control plane shared by the
// whole package. It returns the exit code for os.Exit. Under -short or with
// tools missing outside CI it returns 0 after saying why nothing ran;
// tests then call Shared, which skips.
func Main(m *testing.M, opts cluster.Options, setup func(*cluster.Cluster) error) int {
	flag.Parse() // testing.Short needs parsed flags; m.Run would parse them later
	if testing.Short() {
		return m.Run()
	}
	if err := ToolsBuilt(); err != nil {
		skipReason = testenv.UnavailableReason("%v", err)
		return m.Run()
	}
	c, err := cluster.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start control plane: %v\n", err)
		return 1
	}
	shared = c
	defer c.Stop()
	if setup != nil {
		if err := setup(c); err != nil {
			fmt.Fprintf(os.Stderr, "set up control plane: %v\n%s", err, c.LogTails(40))
			return 1
		}
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "control plane logs:\n%s", c.LogTails(40))
	}
	return code
}

var (
	shared     *cluster.Cluster
	skipReason = "no local control plane: this package's TestMain does not call clustertest.Main"
)

// Shared returns the package's control plane started by Main, or skips tb.
func Shared(tb testing.TB) *cluster.Cluster {
	tb.Helper()
	if shared == nil {
		testenv.Short(tb, "needs the local control plane")
		// Main found the tools missing (and, under CI=true, failed already).
		testenv.Unavailable(tb, "%s", skipReason)
	}
	return shared
}
