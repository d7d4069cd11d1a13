package realnode

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/internal/proc"
	"github.com/gpuslice/gpuslice/nodeplugin/shim"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// MetricsPort is where a node's plugin serves /metrics, on the node's IP.
const MetricsPort = 9400

// startNodePlugin runs gpuslice-nodeplugin as a host process in the node's
// daemon cgroup, with the directories a DaemonSet would mount, and waits
// until the node's slices are published.
func (n *Node) startNodePlugin(ctx context.Context, fresh bool) error {
	l := n.l
	if fresh {
		if err := newBootID(l.bootID()); err != nil {
			return err
		}
	}
	if err := n.startNodePluginProcess(); err != nil {
		return err
	}
	n.mu.Lock()
	p := n.plugin
	n.mu.Unlock()
	// /healthz answers once the plugin has started (registered with the
	// kubelet, specs of prepared claims in place).
	healthz := fmt.Sprintf("http://%s:%d/healthz", n.IP, MetricsPort)
	return waitFor(ctx, p, "the node plugin of "+n.Name+" to start and publish its slices", func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, healthz, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, nil
		}
		slices, err := n.opts.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return false, nil
		}
		for _, s := range slices.Items {
			if len(s.Spec.Devices) > 0 {
				return true, nil
			}
		}
		return false, nil
	})
}

func (n *Node) startNodePluginProcess() error {
	o := n.opts.NodePlugin
	l := n.l
	args := []string{filepath.Join(n.opts.BinDir, "gpuslice-nodeplugin"),
		"--node-name=" + n.Name,
		"--kubeconfig=" + n.opts.Kubeconfig,
		"--simulate=" + o.GPUs,
		"--plugin-dir=" + l.pluginDir(),
		"--registrar-dir=" + l.registrarDir(),
		"--cdi-dir=" + l.cdiDir(),
		"--state-dir=" + l.pluginState(),
		"--accounting-dir=" + l.accountingDir(),
		"--driver-root=" + l.driverRoot(),
		"--shim-library=" + filepath.Join(n.opts.BinDir, "shim", shim.LibraryFile),
		"--shim-dir=" + l.shimDir(),
		"--boot-id-file=" + l.bootID(),
		"--toolkit-config=" + filepath.Join(l.toolkitDir(), "config.toml"),
		fmt.Sprintf("--metrics-address=%s:%d", n.IP, MetricsPort),
		"--v=2",
	}
	if o.Fractions != "" {
		args = append(args, "--fractions="+o.Fractions)
	}
	args = append(args, o.Args...)
	cmd, err := launch{CgroupProcs: n.daemon, Argv: args}.command()
	if err != nil {
		return err
	}
	p, err := proc.Start("gpuslice-nodeplugin", cmd, l.logs())
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.plugin = p
	n.mu.Unlock()
	return nil
}

// populateDriverRoot lays out the simulated driver as a real one is on a
// host: the fake libcuda and libnvidia-ml (make build puts them in
// bin/shim/fake) under the simulated driver's versioned names, and
// gpuslice-smi as nvidia-smi. The plugin's own driver-file search then
// mounts them into containers like a real driver's.
func populateDriverRoot(root, binDir string) error {
	libDir := filepath.Join(root, "usr", "lib", "x86_64-linux-gnu")
	for src, dst := range map[string]string{
		filepath.Join(binDir, "shim", "fake", "libcuda.so.1"):      filepath.Join(libDir, "libcuda.so."+simulate.DriverVersion),
		filepath.Join(binDir, "shim", "fake", "libnvidia-ml.so.1"): filepath.Join(libDir, "libnvidia-ml.so."+simulate.DriverVersion),
		filepath.Join(binDir, "shim", "gpuslice-smi"):              filepath.Join(root, "usr", "bin", "nvidia-smi"),
	} {
		if err := copyFile(src, dst, 0o755); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("the simulated driver needs %s: run `make build`", src)
			}
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// newBootID gives the node a new boot, as the kernel's boot_id does.
func newBootID(path string) error {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := fmt.Sprintf("%x-%x-%x-%x-%x\n", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	return os.WriteFile(path, []byte(id), 0o644)
}
