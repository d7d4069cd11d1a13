// Package devcluster keeps a local cluster running in the background for
// people: `gpuslice dev up` starts a detached server process that owns the
// control plane (package cluster), the real nodes (package realnode) with
// the local registry they pull from, simulated nodes, and the host-path
// storage provisioner; `dev env` prints how to reach it and `dev down`
// stops it with nothing left running.
package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/hostpath"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/localregistry"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// State is what a running server records in <dir>/state.json.
type State struct {
	PID        int      `json:"pid"`
	Kubeconfig string   `json:"kubeconfig"`
	Host       string   `json:"host"`
	Nodes      []string `json:"nodes"`
	StartupMS  int64    `json:"startupMs"`
	// NodePlugins are the node plugins serving the simulated nodes.
	NodePlugins []NodePlugin `json:"nodePlugins"`
	// RealNodes run containers; Registry is where they pull from.
	RealNodes []RealNode `json:"realNodes"`
	Registry  string     `json:"registry,omitempty"`
	// NodePluginImage is the node plugin's image in the local registry, by
	// tag and digest: what gpuslice_platform's node_plugin block installs.
	NodePluginImage string `json:"nodePluginImage,omitempty"`
}

// Env are the shell lines that reach the cluster: KUBECONFIG, the
// quickstart's variables for installing the node plugin on the real nodes
// (TF_VAR_*, which OpenTofu and the gpuslice CLI both read), and the
// slice-check image the acceptance tests run on a slice.
func (s *State) Env() []string {
	lines := []string{"export KUBECONFIG=" + s.Kubeconfig}
	if s.NodePluginImage != "" {
		port := s.Host[strings.LastIndex(s.Host, ":")+1:]
		lines = append(lines,
			"export TF_VAR_node_plugin_image="+s.NodePluginImage,
			"export TF_VAR_driver_root="+realnode.DriverRoot,
			"export TF_VAR_simulated_gpus="+SimulatedGPU.String(),
			// The API server listens on loopback; the plugin's pod shares
			// the host's network.
			`export TF_VAR_node_plugin_env='{KUBERNETES_SERVICE_HOST="127.0.0.1",KUBERNETES_SERVICE_PORT="`+port+`"}'`,
			// The acceptance tests run it in a container on a slice
			// (KUBE_CONFIG_PATH=… make testacc).
			"export GPUSLICE_TEST_SLICE_CHECK_IMAGE="+images.SliceCheck)
	}
	return lines
}

// RealNode is where a real node keeps what people look at.
type RealNode struct {
	Name   string `json:"name"`
	IP     string `json:"ip"`
	Dir    string `json:"dir"`
	CDIDir string `json:"cdiDir"`
	// AccountingDir holds one directory per prepared claim.
	AccountingDir string `json:"accountingDir"`
	// Cgroup is the node's cgroup below every hierarchy's root; Bridge its
	// network link.
	Cgroup string `json:"cgroup"`
	Bridge string `json:"bridge"`
}

// DefaultDir is where the dev cluster lives unless told otherwise:
// $XDG_STATE_HOME/gpuslice/dev, else ~/.local/state/gpuslice/dev.
func DefaultDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "gpuslice", "dev")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "gpuslice", "dev")
	}
	return filepath.Join(os.TempDir(), "gpuslice-dev")
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }
func serverLog(dir string) string { return filepath.Join(dir, "server.log") }

// Running returns the state of the server in dir, or an error saying how to
// start one.
func Running(dir string) (*State, error) {
	data, err := os.ReadFile(statePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no dev cluster is running in %s: start one with `gpuslice dev up`", dir)
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("read %s: %w (remove it and run `gpuslice dev up`)", statePath(dir), err)
	}
	if !alive(s.PID) {
		return nil, fmt.Errorf("the dev cluster in %s is no longer running (server pid %d is gone; its log: %s): run `gpuslice dev up`", dir, s.PID, serverLog(dir))
	}
	return &s, nil
}

// UpOptions configure Up.
type UpOptions struct {
	Dir    string
	BinDir string
	// RealNodes run kubelet and containerd; SimulatedNodes are API
	// objects with a node plugin and no kubelet.
	RealNodes      int
	SimulatedNodes int
	// MIGNodes are more real nodes, each with MIGGPUs (simulated GPUs in
	// MIG mode, e.g. DefaultMIGGPUs) and its own node plugin.
	MIGNodes int
	MIGGPUs  string
	// ServeArgs re-runs the current executable as the server; Up appends
	// the directory, tool and node flags.
	ServeArgs []string
	Timeout   time.Duration
}

// Up starts a server in the background unless one is already running in
// opts.Dir, and returns its state once the control plane is ready.
func Up(ctx context.Context, opts UpOptions) (*State, bool, error) {
	if s, err := Running(opts.Dir); err == nil {
		return s, false, nil
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("create %s: %w", opts.Dir, err)
	}
	_ = os.Remove(statePath(opts.Dir))
	exe, err := os.Executable()
	if err != nil {
		return nil, false, err
	}
	logFile, err := os.Create(serverLog(opts.Dir))
	if err != nil {
		return nil, false, err
	}
	defer logFile.Close()
	args := append(append([]string(nil), opts.ServeArgs...),
		"--dir", opts.Dir, "--bin-dir", opts.BinDir, "--real-nodes", fmt.Sprint(opts.RealNodes), "--nodes", fmt.Sprint(opts.SimulatedNodes),
		"--mig-nodes", fmt.Sprint(opts.MIGNodes), "--mig-gpus", opts.MIGGPUs)
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A session of its own: the server outlives this command and the
	// terminal's Ctrl-C.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("start dev cluster server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	deadline := time.After(timeout)
	for {
		if s, err := Running(opts.Dir); err == nil {
			return s, true, nil
		}
		select {
		case err := <-exited:
			return nil, false, fmt.Errorf("dev cluster server exited (%v):\n%s", err, tailLog(serverLog(opts.Dir)))
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return nil, false, fmt.Errorf("dev cluster not ready after %s; server log:\n%s", timeout, tailLog(serverLog(opts.Dir)))
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return nil, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ServeOptions configure Serve.
type ServeOptions struct {
	Dir, BinDir               string
	RealNodes, SimulatedNodes int
	MIGNodes                  int
	MIGGPUs                   string
}

// DefaultMIGGPUs is a MIG node's hardware: an A100 40 GB in MIG mode with
// seven 1g.5gb instances.
const DefaultMIGGPUs = "a100-40gb:1,mig=1g.5gb*7"

// Serve runs the cluster in the foreground until SIGTERM or SIGINT,
// recording its state for Up, Running and Down.
func Serve(opts ServeOptions) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	dir, binDir := opts.Dir, opts.BinDir
	logf := func(f string, a ...any) { fmt.Printf(f+"\n", a...) }
	if err := checkServeOptions(opts); err != nil {
		return err
	}
	// Each start is a fresh cluster: node state of an earlier one
	// (checkpoints of claims that no longer exist) would only mislead.
	if err := os.RemoveAll(filepath.Join(dir, "nodes")); err != nil {
		return err
	}
	c, err := cluster.Start(ctx, cluster.Options{Dir: filepath.Join(dir, "cluster"), BinDir: binDir, Logf: logf})
	if err != nil {
		return err
	}
	defer c.Stop()
	s := State{PID: os.Getpid(), Kubeconfig: c.KubeconfigPath, Host: c.Host, StartupMS: c.StartupTime.Milliseconds()}
	storageCtx, stopStorage := context.WithCancel(ctx)
	defer stopStorage()
	if err := hostpath.Start(storageCtx, c.Client(), filepath.Join(dir, "volumes")); err != nil {
		return err
	}
	failed := make(chan error, opts.SimulatedNodes+opts.RealNodes+opts.MIGNodes)
	// The nodes, their plugins and the registry stop before the storage
	// and the control plane.
	var stops stopStack
	defer stops.run()
	if opts.RealNodes+opts.MIGNodes > 0 {
		if err := startRealNodes(ctx, opts, c, &s, &stops, failed, logf); err != nil {
			return err
		}
	}
	if err := startSimulatedNodes(ctx, opts, c, &s, &stops, failed); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(statePath(dir), data, 0o600); err != nil {
		return err
	}
	defer os.Remove(statePath(dir))
	fmt.Printf("serving; stop with `gpuslice dev down`\n")
	select {
	case <-ctx.Done():
	case <-watchFailure(c):
		return fmt.Errorf("a control-plane component stopped: %v\n%s", c.Failed(), c.LogTails(20))
	case err := <-failed:
		return err
	}
	fmt.Printf("stopping\n")
	return nil
}

// checkServeOptions refuses, before anything starts, MIG GPUs the node
// plugin cannot simulate and real nodes this machine cannot run.
func checkServeOptions(opts ServeOptions) error {
	if opts.MIGNodes > 0 {
		if _, err := simulate.ParseNode(opts.MIGGPUs); err != nil {
			return fmt.Errorf("--mig-gpus: %w", err)
		}
	}
	if opts.RealNodes+opts.MIGNodes > 0 {
		if err := realnode.Check(opts.BinDir); err != nil {
			return fmt.Errorf("%w (or run only simulated nodes: --real-nodes 0 --nodes 2)", err)
		}
	}
	return nil
}

// stopStack stops what was started in reverse order: last started, first
// stopped.
type stopStack []func()

func (s *stopStack) push(stop func()) { *s = append(*s, stop) }

func (s *stopStack) run() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
}

// startRealNodes starts the local registry with the images nodes pull and
// the real nodes (V100 ones, then MIG ones), recording them in s; a node
// that fails later is reported on failed.
func startRealNodes(ctx context.Context, opts ServeOptions, c *cluster.Cluster, s *State, stops *stopStack, failed chan<- error, logf func(string, ...any)) error {
	dir, binDir := opts.Dir, opts.BinDir
	reg, err := localregistry.Start()
	if err != nil {
		return err
	}
	stops.push(func() { reg.Stop() })
	s.Registry = reg.URL
	if err := realnode.PushImages(ctx, reg, binDir); err != nil {
		return err
	}
	if s.NodePluginImage, err = realnode.PushBuiltNodePluginImage(ctx, reg, binDir, "0.1.0"); err != nil {
		return err
	}
	var real []realnode.Options
	for i := 1; i <= opts.RealNodes; i++ {
		real = append(real, realnode.Options{Name: fmt.Sprintf("gpu-node-%d", i)})
	}
	// A MIG node runs its own plugin on its own simulated GPUs: the
	// platform's DaemonSet simulates V100s on every node it selects.
	for i := 1; i <= opts.MIGNodes; i++ {
		real = append(real, realnode.Options{Name: fmt.Sprintf("mig-node-%d", i), OutsideDaemonSet: true,
			NodePlugin: &realnode.NodePluginOptions{GPUs: opts.MIGGPUs}})
	}
	for _, o := range real {
		name := o.Name
		o.Dir, o.BinDir, o.Kubeconfig, o.Client, o.PauseImage, o.Mirrors, o.Logf =
			filepath.Join(dir, "nodes", name), binDir, c.KubeconfigPath, c.Client(), images.Pause, reg.Mirrors(), logf
		n, err := realnode.Start(ctx, o)
		if err != nil {
			return err
		}
		// Nodes stop before the registry and the control plane.
		stops.push(func() { n.Stop() })
		go func() {
			if err := <-n.Failed(); err != nil {
				failed <- fmt.Errorf("real node %s failed: %w\n%s", name, err, n.LogTails(20))
			}
		}()
		s.Nodes = append(s.Nodes, name)
		s.RealNodes = append(s.RealNodes, RealNode{Name: name, IP: n.IP, Dir: n.Dir, CDIDir: n.CDIDir(), AccountingDir: n.AccountingDir(), Cgroup: n.CgroupRel(), Bridge: n.Bridge()})
	}
	return nil
}

// startSimulatedNodes registers the simulated nodes, each with its node
// plugin, recording them in s; a plugin that fails later is reported on
// failed.
func startSimulatedNodes(ctx context.Context, opts ServeOptions, c *cluster.Cluster, s *State, stops *stopStack, failed chan<- error) error {
	for i := 1; i <= opts.SimulatedNodes; i++ {
		name := fmt.Sprintf("sim-node-%d", i)
		if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: name}); err != nil {
			return err
		}
		s.Nodes = append(s.Nodes, name)
		// The plugin publishes the node's GPU slices and serves its DRA
		// socket; stopped before the control plane.
		p, np, err := startNodePlugin(ctx, c, opts.Dir, opts.BinDir, name)
		if err != nil {
			return err
		}
		stops.push(func() { p.Stop() })
		go func() {
			if err := <-p.Fatal(); err != nil {
				failed <- fmt.Errorf("node plugin of %s failed: %w", name, err)
			}
		}()
		s.NodePlugins = append(s.NodePlugins, np)
	}
	return nil
}

func watchFailure(c *cluster.Cluster) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for c.Failed() == nil {
			time.Sleep(time.Second)
		}
		close(ch)
	}()
	return ch
}

// Down stops the server in dir and waits until it and every component have
// exited.
func Down(dir string, timeout time.Duration) (bool, error) {
	s, err := Running(dir)
	if err != nil {
		return false, nil // nothing to stop
	}
	if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, fmt.Errorf("stop dev cluster server %d: %w", s.PID, err)
	}
	deadline := time.Now().Add(timeout)
	for alive(s.PID) {
		if time.Now().After(deadline) {
			// Components die with their parent (they run with a parent-death
			// signal), so killing the server is enough.
			_ = syscall.Kill(s.PID, syscall.SIGKILL)
			return true, fmt.Errorf("dev cluster server %d did not stop within %s and was killed", s.PID, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true, nil
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func tailLog(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}
