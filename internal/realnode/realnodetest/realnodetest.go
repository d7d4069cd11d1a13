// Package realnodetest starts real nodes (package realnode) for Go tests on
// a test's control plane, with a local registry holding the images they
// pull, and stops everything when the test or the package ends.
package realnodetest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/localregistry"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// Require skips tb (fails it in CI) when this machine cannot run real nodes
// or their tools are not built.
func Require(tb testing.TB) {
	tb.Helper()
	clustertest.RequireTools(tb)
	if err := realnode.Check(cluster.FindBinDir()); err != nil {
		testenv.Unavailable(tb, "real nodes: %v", err)
	}
}

// Env is a set of real nodes and the registry they pull from.
type Env struct {
	Cluster  *cluster.Cluster
	Registry *localregistry.Registry
	Nodes    []*realnode.Node
	BinDir   string
	dir      string
}

// Options choose the nodes: one per name, each with GPUs simulated GPUs
// ("v100-32gb:1" when empty) unless NodeGPUs names others for it.
type Options struct {
	Names     []string
	GPUs      string
	NodeGPUs  map[string]string // by node name, e.g. an A100 in MIG mode: "a100-40gb:1,mig=1g.5gb*7"
	Fractions string
	// PluginArgs are more flags of every node plugin, e.g. --any-size=true;
	// NodePluginArgs more still for the node of that name.
	PluginArgs     []string
	NodePluginArgs map[string][]string
	// NoNodePlugin leaves the nodes without a node plugin process.
	NoNodePlugin bool
}

// Start starts the nodes on c and stops them (printing their logs if tb
// failed) when tb ends.
func Start(tb testing.TB, c *cluster.Cluster, opts Options) *Env {
	tb.Helper()
	Require(tb)
	env, err := start(c, opts, tb.Logf)
	if env != nil {
		tb.Cleanup(func() {
			if tb.Failed() {
				tb.Log(env.LogTails(40))
			}
			if err := env.Stop(); err != nil {
				tb.Error(err)
			}
		})
	}
	if err != nil {
		tb.Fatal(err)
	}
	return env
}

func start(c *cluster.Cluster, opts Options, logf func(string, ...any)) (*Env, error) {
	ctx := context.Background()
	// Not the test's temporary directory: unix socket paths must stay
	// short, and test names can be long.
	dir, err := os.MkdirTemp("", "realnodes-")
	if err != nil {
		return nil, err
	}
	env := &Env{Cluster: c, BinDir: cluster.FindBinDir(), dir: dir}
	if env.Registry, err = localregistry.Start(); err != nil {
		return env, err
	}
	if err := realnode.PushImages(ctx, env.Registry, env.BinDir); err != nil {
		return env, err
	}
	gpus := opts.GPUs
	if gpus == "" {
		gpus = "v100-32gb:1"
	}
	for _, name := range opts.Names {
		o := realnode.Options{
			Name: name, Dir: filepath.Join(dir, name), BinDir: env.BinDir,
			Kubeconfig: c.KubeconfigPath, Client: c.Client(),
			PauseImage: images.Pause, Mirrors: env.Registry.Mirrors(), Logf: logf,
		}
		if !opts.NoNodePlugin {
			g := gpus
			if own, ok := opts.NodeGPUs[name]; ok {
				g = own
			}
			args := append(slices.Clone(opts.PluginArgs), opts.NodePluginArgs[name]...)
			o.NodePlugin = &realnode.NodePluginOptions{GPUs: g, Fractions: opts.Fractions, Args: args}
		}
		n, err := realnode.Start(ctx, o)
		if err != nil {
			return env, err
		}
		env.Nodes = append(env.Nodes, n)
	}
	return env, nil
}

// Stop stops the nodes and the registry and removes the nodes' directory.
func (e *Env) Stop() error {
	var errs []error
	for _, n := range e.Nodes {
		if err := n.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop node %s: %w", n.Name, err))
		}
	}
	if e.Registry != nil {
		errs = append(errs, e.Registry.Stop())
	}
	// The logs stay for a look when something failed to stop.
	if errors.Join(errs...) == nil {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// LogTails returns the last lines of every node's logs.
func (e *Env) LogTails(lines int) string {
	var s string
	for _, n := range e.Nodes {
		s += n.LogTails(lines)
	}
	return s
}

// Node returns the node named name, or nil.
func (e *Env) Node(name string) *realnode.Node {
	for _, n := range e.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

var (
	shared     *Env
	skipReason = "no real nodes: this package's TestMain does not call realnodetest.Main"
)

// Main runs a test package against one control plane and the real nodes
// of opts, shared by all its tests, and returns the exit code. Without
// what real nodes need it runs the tests, which then skip (fail in CI)
// when they call Shared.
func Main(m *testing.M, opts Options) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	bin := cluster.FindBinDir()
	if err := errors.Join(clustertest.ToolsBuilt(), realnode.Check(bin)); err != nil {
		skipReason = testenv.UnavailableReason("real nodes: %v", err)
		return m.Run()
	}
	c, err := cluster.Start(context.Background(), cluster.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start control plane: %v\n", err)
		return 1
	}
	defer c.Stop()
	env, err := start(c, opts, func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) })
	if env != nil {
		defer func() {
			if err := env.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "start real nodes: %v\n%s", err, c.LogTails(20))
		return 1
	}
	shared = env
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "%s\n%s", env.LogTails(60), c.LogTails(30))
	}
	return code
}

// Shared returns the package's nodes started by Main, or skips tb.
func Shared(tb testing.TB) *Env {
	tb.Helper()
	if shared == nil {
		testenv.Short(tb, "needs real nodes")
		testenv.Unavailable(tb, "%s", skipReason)
	}
	return shared
}

// PushNodePlugin pushes the node plugin's image (bin/image, `make image`)
// to the registry as version and returns its reference by tag and digest.
func (e *Env) PushNodePlugin(tb testing.TB, version string) string {
	tb.Helper()
	ref, err := realnode.PushNodePluginImage(context.Background(), e.Registry, e.BinDir, version)
	if errors.Is(err, fs.ErrNotExist) {
		testenv.Unavailable(tb, "node plugin image: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return ref
}

// Eventually checks cond every 100 ms until it holds, failing the test
// with cond's last state when timeout (a bound for a hung node, not a
// timing assertion) passes first.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s; last state: %s", what, timeout, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
