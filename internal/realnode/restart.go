package realnode

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gpuslice/gpuslice/internal/proc"
)

// RestartKubelet stops the kubelet and starts it again, as an upgrade or a
// crash would; containers keep running.
func (n *Node) RestartKubelet(ctx context.Context) error {
	defer n.operation()()
	n.mu.Lock()
	old := n.kubelet
	n.mu.Unlock()
	old.Stop(10 * time.Second)
	return n.startKubelet(ctx)
}

// KillNodePlugin kills the node plugin (SIGKILL, as a crash or an evicted
// pod would end it); StartNodePlugin starts it again.
func (n *Node) KillNodePlugin() {
	n.mu.Lock()
	p := n.plugin
	n.pluginKilled = true
	n.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// StartNodePlugin starts the node plugin again after KillNodePlugin.
func (n *Node) StartNodePlugin(ctx context.Context) error {
	if n.opts.NodePlugin == nil {
		return fmt.Errorf("node %s runs no node plugin", n.Name)
	}
	defer n.operation()()
	if err := n.startNodePlugin(ctx, false); err != nil {
		return err
	}
	n.mu.Lock()
	n.pluginKilled = false
	n.mu.Unlock()
	return nil
}

// Reboot does to the node what a reboot does: every process ends (the
// containers with them), what lives in /run is gone (CDI specs, accounting
// regions, containerd's state, the pods' network), the boot ID changes.
// Then containerd, kubelet and the node plugin start again, and kubelet
// restarts the pods it finds in the API server.
func (n *Node) Reboot(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.opts.Timeout)
	defer cancel()
	defer n.operation()()
	n.mu.Lock()
	procs := []*proc.Process{n.kubelet, n.plugin, n.containerd}
	n.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			p.Kill()
		}
	}
	if err := killCgroup(n.ms, n.rec.CgroupRel, 30*time.Second); err != nil {
		return err
	}
	if err := deleteLink(bridgeName(n.rec.Slot)); err != nil {
		return err
	}
	if err := os.RemoveAll(n.l.path("run")); err != nil {
		return fmt.Errorf("empty the node's /run: %w", err)
	}
	if err := newBootID(n.l.bootID()); err != nil {
		return err
	}
	// Nothing is fresh but /run: configuration, kubelet's and the plugin's
	// checkpoints and the images survive, as on disk.
	for _, d := range []string{n.l.containerdState(), n.l.cniIPAM(), n.l.cdiDir(), n.l.accountingDir(), n.l.path("run", "tmp"), n.l.path("run", "runc"), n.l.path("run", "containerd-shims")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	var err error
	if n.daemon, err = createCgroup(n.ms, n.rec.CgroupRel+"/daemons"); err != nil {
		return err
	}
	if _, err := createCgroup(n.ms, n.rec.CgroupRel); err != nil {
		return err
	}
	if err := createBridge(n.rec.Slot); err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	// The plugin first, as its DaemonSet pod would come up: it recreates
	// the specs of prepared claims before kubelet restarts their pods.
	if n.opts.NodePlugin != nil {
		if err := n.startNodePluginProcess(); err != nil {
			return err
		}
	}
	return n.startKubelet(ctx)
}
