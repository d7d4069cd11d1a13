// Package realnode runs real Kubernetes nodes on this machine for the local
// cluster: for each node its own containerd (with runc and the CNI bridge
// plugin), a kubelet registered with the local control plane, and the
// gpuslice node plugin on simulated GPUs. Containers run for real; only the
// GPU silicon and its driver are simulated (go-nvml's mock in the plugin,
// the fake libcuda and libnvidia-ml inside containers).
//
// Several nodes, from several processes, share one machine: each takes a
// slot (bridge, pod subnet and node IP, cgroup tree), runs its daemons in a
// private mount namespace (their mounts never reach the host and vanish
// with them; the host paths kubelet and containerd hard-code are shadowed
// by the node's own directories) and has a reaper that cleans up after it
// when its owner dies. Real nodes need root, writable cgroups and overlayfs
// (Check says what is missing).
package realnode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/internal/proc"
)

// Options describe one node.
type Options struct {
	Name string
	// Dir holds the node's configuration, state and logs; it is emptied
	// first and kept after Stop (its logs stay readable).
	Dir string
	// BinDir holds kubelet, containerd, ctr, containerd-shim-runc-v2, runc,
	// cni/ (make tools), gpuslice-nodeplugin and shim/ (make build).
	BinDir string
	// Kubeconfig reaches the control plane as an administrator; Client is
	// a client built from it.
	Kubeconfig string
	Client     kubernetes.Interface
	// PauseImage is the pod sandbox image; Mirrors send pulls of a
	// registry name to a URL (the local registry), e.g.
	// "registry.gpuslice.test" → "http://127.0.0.1:41234".
	PauseImage string
	Mirrors    map[string]string
	Labels     map[string]string
	// NodePlugin, when set, runs the gpuslice node plugin for the node as a
	// host process; nil leaves the node without one (the platform's
	// DaemonSet runs it as a pod instead).
	NodePlugin *NodePluginOptions
	// OutsideDaemonSet leaves out the label the node plugin's DaemonSet
	// selects (nvidia.com/gpu.present), for a node whose plugin runs as a
	// host process (NodePlugin) in a cluster whose platform also installs
	// the DaemonSet: e.g. a node with other simulated GPUs than the
	// platform's simulated_gpus.
	OutsideDaemonSet bool
	// KeepImages keeps the images containerd pulled into Dir before (a
	// node that restarts, not a new one); everything else is fresh.
	KeepImages bool
	// Timeout bounds Start; 0 means two minutes.
	Timeout time.Duration
	Logf    func(format string, args ...any)
}

// NodePluginOptions configure the node plugin of a node.
type NodePluginOptions struct {
	// GPUs is the simulated hardware, e.g. "v100-32gb:1".
	GPUs      string
	Fractions string // e.g. "25,50,100"; empty: the plugin's default
	// Args are more flags of the plugin, e.g. --any-size=true.
	Args []string
}

// Node is a running real node.
type Node struct {
	Name string
	// IP is the node's InternalIP (on its bridge).
	IP  string
	Dir string
	// Started says how long Start took to each milestone.
	Started Timings
	opts    Options
	l       layout
	rec     record
	ms      []cgroupMount

	reaper *reaper
	daemon []string // cgroup.procs of the daemons' cgroup

	mu         sync.Mutex
	containerd *proc.Process
	kubelet    *proc.Process
	plugin     *proc.Process
	forwards   []*forwarder
	// stopping, busy (restarts under way) and pluginKilled tell Failed
	// which exits were asked for.
	stopping     bool
	busy         int
	pluginKilled bool
	stopOnce     sync.Once
	stopErr      error
}

// Timings are the milestones of Start, from its beginning.
type Timings struct {
	Containerd, Ready, SlicesPublished time.Duration
}

// Binaries a real node runs, from BinDir.
var nodeTools = []string{"kubelet", "containerd", "containerd-shim-runc-v2", "runc", "cni/bridge", "cni/host-local", "cni/loopback"}

// Check says why this machine cannot run real nodes, or nil.
func Check(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root (kubelet, containerd and runc manage cgroups, mounts and network links)")
	}
	ms, err := cgroupMounts()
	if err != nil {
		return fmt.Errorf("real nodes need cgroups: %w", err)
	}
	probe := filepath.Join(ms[0].Path, fmt.Sprintf("gpuslice-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return fmt.Errorf("real nodes need writable cgroups: %w", err)
	}
	_ = os.Remove(probe)
	fss, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(fss), "\toverlay\n") {
		return errors.New("real nodes need overlayfs (containerd's snapshotter): load the overlay module")
	}
	for _, t := range nodeTools {
		if info, err := os.Stat(filepath.Join(binDir, t)); err != nil || info.IsDir() {
			return fmt.Errorf("%s not found in %s: run `make tools`", t, binDir)
		}
	}
	return nil
}

// Start starts containerd, kubelet and (when asked) the node plugin, and
// returns once the node is Ready and its slices are published. On failure
// everything already started is cleaned up again.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := Check(opts.BinDir); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := clearDir(dir, opts.KeepImages); err != nil {
		return nil, fmt.Errorf("clear node directory %s: %w", dir, err)
	}
	n := &Node{Name: opts.Name, Dir: dir, opts: opts, l: layout(dir)}
	var hostPaths []string
	for _, s := range n.l.shadows() {
		hostPaths = append(hostPaths, s[1])
	}
	if n.rec, err = takeSlot(opts.Name, dir, hostPaths); err != nil {
		return nil, err
	}
	n.IP = nodeIP(n.rec.Slot)
	if n.reaper, err = startReaper(n.rec.Slot); err != nil {
		_ = releaseSlot(n.rec.Slot)
		return nil, err
	}
	if err := n.start(ctx); err != nil {
		tails := n.LogTails(30)
		_ = n.Stop()
		return nil, fmt.Errorf("start real node %s: %w\n%s", opts.Name, err, tails)
	}
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	began := time.Now()
	l := n.l
	for _, d := range []string{l.logs(), l.containerdRoot(), l.containerdState(), l.registryHosts(), l.kubeletRoot(), l.kubeletCerts(),
		l.podLogs(), l.volumePlugins(), l.cniConf(), l.cniIPAM(), l.cdiDir(), l.accountingDir(), l.pluginState(), l.path("containerd", "opt"), l.path("run", "tmp"), l.path("run", "runc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, s := range l.shadows() {
		if err := os.MkdirAll(s[0], 0o755); err != nil {
			return err
		}
	}
	// The simulated GPU's driver is installed on the node, whoever runs
	// the node plugin.
	if err := populateDriverRoot(l.driverRoot(), n.opts.BinDir); err != nil {
		return err
	}
	// The node is configured as gpuslice requires: images cannot pick GPUs.
	if err := os.WriteFile(filepath.Join(l.toolkitDir(), "config.toml"), []byte("accept-nvidia-visible-devices-envvar-when-unprivileged = false\n"), 0o644); err != nil {
		return err
	}
	var err error
	if n.ms, err = cgroupMounts(); err != nil {
		return err
	}
	if n.daemon, err = createCgroup(n.ms, n.rec.CgroupRel+"/daemons"); err != nil {
		return err
	}
	// kubelet's cgroup root must exist in every hierarchy beforehand.
	if _, err := createCgroup(n.ms, n.rec.CgroupRel); err != nil {
		return err
	}
	if err := createBridge(n.rec.Slot); err != nil {
		return err
	}
	if err := writeCNIConfig(l.cniConf(), l.cniIPAM(), n.rec.Slot); err != nil {
		return err
	}
	if err := n.serveAPIService(ctx); err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	n.Started.Containerd = time.Since(began)
	n.opts.Logf("node %s: containerd ready (%s)", n.Name, n.Started.Containerd.Round(10*time.Millisecond))
	if err := n.writeKubelet(); err != nil {
		return err
	}
	if err := n.startKubelet(ctx); err != nil {
		return err
	}
	n.Started.Ready = time.Since(began)
	n.opts.Logf("node %s: Ready at %s (%s)", n.Name, n.IP, n.Started.Ready.Round(10*time.Millisecond))
	if n.opts.NodePlugin != nil {
		if err := n.startNodePlugin(ctx, true); err != nil {
			return err
		}
		n.Started.SlicesPublished = time.Since(began)
		n.opts.Logf("node %s: node plugin registered, slices published (%s)", n.Name, n.Started.SlicesPublished.Round(10*time.Millisecond))
	}
	return nil
}

// clearDir empties a node's directory, keeping containerd's root (its
// images) when asked.
func clearDir(dir string, keepImages bool) error {
	if !keepImages {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if e.Name() == "containerd" {
			// config and certs.d are written anew; root holds the images
			if err := os.Remove(filepath.Join(dir, "containerd", "config.toml")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// waitFor polls done until it holds, p exits, or ctx ends.
func waitFor(ctx context.Context, p *proc.Process, what string, done func(context.Context) (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("waiting for %s: %w", what, p.ExitError())
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// Slot is the node's slot on this machine (its bridge is gpuslice<slot>).
func (n *Node) Slot() int { return n.rec.Slot }

// Bridge is the node's network link.
func (n *Node) Bridge() string { return bridgeName(n.rec.Slot) }

// CgroupRel is the node's cgroup below every hierarchy's root.
func (n *Node) CgroupRel() string { return n.rec.CgroupRel }

// CDIDir is where the node's container runtime reads CDI specs.
func (n *Node) CDIDir() string { return n.l.cdiDir() }

// AccountingDir holds one accounting directory per prepared claim.
func (n *Node) AccountingDir() string { return n.l.accountingDir() }

// StateDir is the node plugin's state directory (--state-dir): its
// checkpoint, ld.so.preload file and shim libraries.
func (n *Node) StateDir() string { return n.l.pluginState() }

// KubeletRoot is the kubelet's --root-dir.
func (n *Node) KubeletRoot() string { return n.l.kubeletRoot() }

// DriverRoot is the simulated driver's root (fake libraries, nvidia-smi).
func (n *Node) DriverRoot() string { return n.l.driverRoot() }

// ContainerdSocket is the node's CRI endpoint.
func (n *Node) ContainerdSocket() string { return n.l.containerdSocket() }
