package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/internal/proc"
)

// Stop stops the node's daemons and containers, removes its cgroups,
// bridge and Node object, and gives its slot back. Its directory stays.
// It is safe to call more than once.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		var errs []error
		n.mu.Lock()
		n.stopping = true
		kubelet, plugin, containerd := n.kubelet, n.plugin, n.containerd
		n.mu.Unlock()
		// The order of a node shutting down: kubelet first, so it does not
		// restart what is being stopped.
		for _, p := range []*proc.Process{kubelet, plugin, containerd} {
			if p != nil {
				p.Stop(10 * time.Second)
			}
		}
		if err := n.stopForwards(); err != nil {
			errs = append(errs, err)
		}
		if err := cleanUp(n.rec); err != nil {
			errs = append(errs, err)
		}
		if n.opts.Client != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := n.opts.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			cancel()
			if err != nil && !apierrors.IsNotFound(err) && !isUnreachable(err) {
				errs = append(errs, fmt.Errorf("delete node %s: %w", n.Name, err))
			}
		}
		if err := releaseSlot(n.rec.Slot); err != nil {
			errs = append(errs, err)
		}
		if n.reaper != nil {
			if err := n.reaper.dismiss(); err != nil {
				errs = append(errs, fmt.Errorf("node reaper: %w", err))
			}
		}
		n.stopErr = errors.Join(errs...)
	})
	return n.stopErr
}

// isUnreachable: a control plane stopped before its nodes has nothing to
// delete any more.
func isUnreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded)
}

// Failed receives why the node stopped working: a daemon that exited
// without Stop, RestartKubelet, KillNodePlugin or Reboot asking it to.
func (n *Node) Failed() <-chan error {
	ch := make(chan error, 1)
	go func() {
		for {
			n.mu.Lock()
			procs := []*proc.Process{n.containerd, n.kubelet}
			if !n.pluginKilled {
				procs = append(procs, n.plugin)
			}
			stopping, busy := n.stopping, n.busy
			n.mu.Unlock()
			if stopping {
				ch <- nil
				return
			}
			for _, p := range procs {
				if p != nil && !p.Running() && busy == 0 {
					ch <- p.ExitError()
					return
				}
			}
			time.Sleep(time.Second)
		}
	}()
	return ch
}

// operation marks a deliberate restart for Failed until done is called.
func (n *Node) operation() (done func()) {
	n.mu.Lock()
	n.busy++
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		n.busy--
		n.mu.Unlock()
	}
}

// PIDs lists the node's running daemons, for checks that nothing is left.
func (n *Node) PIDs() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	var pids []int
	for _, p := range []*proc.Process{n.containerd, n.kubelet, n.plugin} {
		if p != nil && p.Running() {
			pids = append(pids, p.PID())
		}
	}
	return pids
}

// LogTails returns the last lines of each daemon's log.
func (n *Node) LogTails(lines int) string {
	var b strings.Builder
	for _, name := range []string{"containerd", "kubelet", "gpuslice-nodeplugin"} {
		path := filepath.Join(n.l.logs(), name+".log")
		if _, err := os.Stat(path); err == nil {
			fmt.Fprintf(&b, "--- last %d lines of %s on %s (%s) ---\n%s\n", lines, name, n.Name, path, proc.TailFile(path, lines))
		}
	}
	return b.String()
}
