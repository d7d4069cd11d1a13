// Package demo tells the gpuslice story on the running dev cluster
// (`gpuslice dev up`: two real nodes, each a kubelet with containerd and
// runc and one simulated V100-PCIE-32GB behind the node plugin): the
// quickstart applied with OpenTofu, what it made in the cluster, a CUDA
// program inside real containers on an 8 GiB and a 16 GiB slice of one GPU,
// NodeUnprepareResources when one goes, a mistake caught at plan, and a
// workload waiting for a free slice. `make demo` runs it through
// `gpuslice-dev demo`.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuslice/gpuslice/internal/devcluster"
)

// Options say where the dev cluster, the built tools and the repository's
// examples are.
type Options struct {
	Dir         string // the running dev cluster's directory
	BinDir      string // the built tools: tofu, gpuslice
	Repo        string // the repository root, for its examples
	TFCLIConfig string // OpenTofu CLI configuration naming the local provider mirror
}

type demo struct {
	dir, binDir, repo, work string
	env                     []string
	state                   *devcluster.State
	client                  kubernetes.Interface
}

// Run tells the story on the running dev cluster in opts.Dir.
func Run(ctx context.Context, opts Options) error {
	d := &demo{dir: opts.Dir, binDir: opts.BinDir, repo: opts.Repo}
	if err := d.run(ctx, opts.TFCLIConfig); err != nil {
		return fmt.Errorf("demo failed: %w", err)
	}
	return nil
}

func (d *demo) run(ctx context.Context, tfConfig string) error {
	if err := d.prepare(tfConfig); err != nil {
		return err
	}
	d.introduce()
	qs := filepath.Join(d.work, "examples", "quickstart")
	ollama, err := d.quickstart(ctx, qs)
	if err != nil {
		return err
	}
	if err := d.slices(ctx, ollama); err != nil {
		return err
	}
	if err := d.refusedAtPlan(qs); err != nil {
		return err
	}
	if err := d.waiting(ctx); err != nil {
		return err
	}

	step(10, "The quickstart's outputs")
	if err := d.cmd(qs, "tofu", "output", "-no-color"); err != nil {
		return err
	}
	fmt.Printf("\n  Done. The cluster keeps running: export KUBECONFIG=%s\n", d.state.Kubeconfig)
	fmt.Printf("  `make demo-down` stops everything.\n\n")
	return nil
}

// prepare connects to the running dev cluster and copies the examples
// into the demo's work directory, with the environment the tools run in.
func (d *demo) prepare(tfConfig string) error {
	var err error
	if d.state, err = devcluster.Running(d.dir); err != nil {
		return err
	}
	if len(d.state.RealNodes) < 2 {
		return fmt.Errorf("the demo needs two real nodes: run `gpuslice dev up --real-nodes 2`")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", d.state.Kubeconfig)
	if err != nil {
		return err
	}
	if d.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if d.binDir, err = filepath.Abs(d.binDir); err != nil {
		return err
	}
	// The examples are copied so OpenTofu's state and lock file stay out of
	// the repository.
	d.work = filepath.Join(d.dir, "work")
	if err := os.RemoveAll(d.work); err != nil {
		return err
	}
	if err := os.CopyFS(filepath.Join(d.work, "examples"), os.DirFS(filepath.Join(d.repo, "examples"))); err != nil {
		return fmt.Errorf("copy the examples: %w", err)
	}
	d.env = append(os.Environ(), "KUBE_CONFIG_PATH="+d.state.Kubeconfig, "TF_CLI_CONFIG_FILE="+tfConfig, "TF_IN_AUTOMATION=1")
	// What `gpuslice dev env` prints: KUBECONFIG and the quickstart's
	// variables installing the node plugin from the local registry.
	for _, l := range d.state.Env() {
		name, value, _ := strings.Cut(strings.TrimPrefix(l, "export "), "=")
		d.env = append(d.env, name+"="+strings.Trim(value, "'"))
	}
	return nil
}

// introduce says what runs for real and what is simulated.
func (d *demo) introduce() {
	fmt.Printf("\ngpuslice demo: share V100s on Kubernetes, declared in HCL, applied with OpenTofu\n\n")
	fmt.Printf("  A real control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager v1.37.2) ready in %.1f s\n", float64(d.state.StartupMS)/1000)
	fmt.Printf("  at %s, and real nodes %s: each a kubelet v1.37.2 with containerd v2.4.2 and runc v1.5.3,\n", d.state.Host, strings.Join(d.state.Nodes, " and "))
	fmt.Printf("  pulling images from a local registry that holds the gpuslice node plugin's image, built in Go. Everything is\n")
	fmt.Printf("  built from Go modules. Simulated: only the GPU silicon and its driver — one V100-PCIE-32GB per node (go-nvml's\n")
	fmt.Printf("  mock in the plugin, a fake libcuda and libnvidia-ml mounted into containers as a real driver's would be).\n\n")
}

// quickstart applies examples/quickstart (in qs) and shows what it made;
// it returns the node Ollama runs on.
func (d *demo) quickstart(ctx context.Context, qs string) (string, error) {
	step(1, "tofu init && tofu apply on examples/quickstart: the platform (with the node plugin), packages, a quota, Ollama")
	fmt.Printf("     $ eval \"$(gpuslice dev env)\"   # KUBECONFIG, and TF_VAR_node_plugin_image=%s …\n", d.state.NodePluginImage)
	if err := d.cmd(qs, "tofu", "init", "-input=false", "-no-color"); err != nil {
		return "", err
	}
	if err := d.cmd(qs, "tofu", "apply", "-auto-approve", "-input=false", "-no-color", "-var", "wait_for=scheduled"); err != nil {
		return "", err
	}

	step(2, "The platform's DaemonSet runs the node plugin from its image on every node; each published its GPU as slices")
	if err := d.showPluginPods(ctx); err != nil {
		return "", err
	}
	if err := showSlices(ctx, d.client); err != nil {
		return "", err
	}

	step(3, "Packages are DeviceClasses selecting slices by driver, model and fraction")
	if err := showPackages(ctx, d.client); err != nil {
		return "", err
	}

	step(4, "team-a's quota: slices per package (0 for the others) and pooled CPU and RAM, and what is used")
	if err := showQuota(ctx, d.client, "team-a"); err != nil {
		return "", err
	}

	step(5, "Ollama's claim: allocated by the scheduler, prepared by the kubelet through the node plugin")
	return d.showOllama(ctx)
}

// slices runs slice-check on two slices of the GPU beside Ollama (on node
// ollama), then deletes one to show it unprepared.
func (d *demo) slices(ctx context.Context, ollama string) error {
	other := d.otherNode(ollama)
	step(6, fmt.Sprintf("slice-check, a CUDA program from the local registry, on an 8 GiB and a 16 GiB slice of %s's GPU at once", ollama))
	fmt.Printf("     (%s is cordoned meanwhile, so both land beside Ollama on one V100)\n", other)
	if err := setUnschedulable(ctx, d.client, other, true); err != nil {
		return err
	}
	slicesDir := filepath.Join("internal", "demo", "slices")
	if err := d.cmd(d.repo, "gpuslice", "apply", slicesDir, "-stack", "demo-slices", "-auto-approve"); err != nil {
		return err
	}
	checks, err := d.showChecks(ctx, "team-c", []string{"check-8gi", "check-16gi"})
	if err != nil {
		return err
	}

	step(7, "Deleting the 16 GiB workload: the kubelet calls NodeUnprepareResources, its CDI spec and accounting go")
	if err := d.showUnprepare(ctx, checks[1]); err != nil {
		return err
	}
	if err := d.cmd(d.repo, "gpuslice", "destroy", slicesDir, "-stack", "demo-slices", "-auto-approve"); err != nil {
		return err
	}
	return setUnschedulable(ctx, d.client, other, false)
}

// refusedAtPlan shows a mistaken change to the quickstart (in qs) refused
// at plan.
func (d *demo) refusedAtPlan(qs string) error {
	step(8, "A mistaken change fails at plan: a 131072-token context does not fit an 8 GiB slice")
	if err := d.cmd(qs, "tofu", "plan", "-input=false", "-no-color", "-var", "context_length=131072"); err == nil {
		return fmt.Errorf("tofu plan with context_length=131072 succeeded; the fit check should have refused it")
	}
	fmt.Printf("     (tofu plan exited non-zero, as it should: nothing was changed)\n")
	return nil
}

// waiting applies two whole-GPU trainers and shows the one that waits for
// a slice diagnosed.
func (d *demo) waiting(ctx context.Context) error {
	step(9, "Two whole-GPU trainers for team-b, applied with the gpuslice CLI: one gets the free GPU, one waits")
	waiting := filepath.Join("internal", "demo", "waiting")
	if err := d.cmd(d.repo, "gpuslice", "apply", waiting, "-stack", "demo-waiting", "-auto-approve"); err != nil {
		return err
	}
	return d.waitForSlice(ctx, waiting)
}

// otherNode is the real node that is not name.
func (d *demo) otherNode(name string) string {
	for _, n := range d.state.RealNodes {
		if n.Name != name {
			return n.Name
		}
	}
	return ""
}

// waitForSlice shows `gpuslice status` once one trainer runs and the other
// is diagnosed as waiting for a slice.
func (d *demo) waitForSlice(ctx context.Context, dir string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, _ := d.output(d.repo, "gpuslice", "status", dir, "-stack", "demo-waiting")
		if strings.Contains(out, "WaitingForSlice") && strings.Contains(out, "Running") {
			indent(out)
			return nil
		}
		if time.Now().After(deadline) {
			indent(out)
			return fmt.Errorf("no trainer was diagnosed as waiting for a slice within 2 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// cmd runs a built tool in dir, its output indented under the step.
func (d *demo) cmd(dir, tool string, args ...string) error {
	fmt.Printf("     $ %s %s\n", tool, strings.Join(args, " "))
	c := exec.Command(filepath.Join(d.binDir, tool), args...)
	c.Dir, c.Env = dir, d.env
	w := &indenter{w: os.Stdout, prefix: "       "}
	c.Stdout, c.Stderr = w, w
	err := c.Run()
	w.flush()
	return err
}

func (d *demo) output(dir, tool string, args ...string) (string, error) {
	c := exec.Command(filepath.Join(d.binDir, tool), args...)
	c.Dir, c.Env = dir, d.env
	out, err := c.CombinedOutput()
	return string(out), err
}

func step(n int, title string) { fmt.Printf("\n  %d. %s\n\n", n, title) }

func indent(s string) {
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Printf("       %s\n", line)
	}
}

// indenter prefixes every line written through it.
type indenter struct {
	w       io.Writer
	prefix  string
	partial []byte
}

func (i *indenter) Write(p []byte) (int, error) {
	i.partial = append(i.partial, p...)
	for {
		n := strings.IndexByte(string(i.partial), '\n')
		if n < 0 {
			return len(p), nil
		}
		fmt.Fprintf(i.w, "%s%s\n", i.prefix, i.partial[:n])
		i.partial = i.partial[n+1:]
	}
}

func (i *indenter) flush() {
	if len(i.partial) > 0 {
		fmt.Fprintf(i.w, "%s%s\n", i.prefix, i.partial)
		i.partial = nil
	}
}
