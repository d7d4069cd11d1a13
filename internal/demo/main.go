// Package demo tells the gpuslice story on the running dev cluster
// (`gpuslice dev up`, two simulated nodes with one V100-PCIE-32GB each and
// the node plugin in simulation mode): the quickstart applied with OpenTofu,
// what it made in the cluster, what the node plugin prepared for the claim,
// what nvidia-smi shows inside, a mistake caught at plan, and a workload
// waiting for a free slice. `make demo` runs it through `gpuslice-dev demo`.
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

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/devcluster"
)

type demo struct {
	dir, binDir, repo, work string
	env                     []string
	state                   *devcluster.State
	client                  kubernetes.Interface
}

// Options say where the dev cluster, the built tools and the repository's
// examples are.
type Options struct {
	Dir         string // the running dev cluster's directory
	BinDir      string // the built tools: tofu, gpuslice, shim/
	Repo        string // the repository root, for its examples
	TFCLIConfig string // OpenTofu CLI configuration naming the local provider mirror
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
	var err error
	if d.state, err = devcluster.Running(d.dir); err != nil {
		return err
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
	d.env = append(os.Environ(), "KUBE_CONFIG_PATH="+d.state.Kubeconfig, "TF_CLI_CONFIG_FILE="+tfConfig, "TF_IN_AUTOMATION=1", "KUBECONFIG="+d.state.Kubeconfig)

	fmt.Printf("\ngpuslice demo: share V100s on Kubernetes, declared in HCL, applied with OpenTofu\n\n")
	fmt.Printf("  A real control plane — etcd, kube-apiserver, kube-scheduler, kube-controller-manager v1.37.2 built from Go\n")
	fmt.Printf("  modules — ready in %.1f s at %s, with simulated nodes %s, each running the gpuslice\n", float64(d.state.StartupMS)/1000, d.state.Host, strings.Join(d.state.Nodes, " and "))
	fmt.Printf("  node plugin in simulation mode (go-nvml's mock with a V100-PCIE-32GB profile).\n")
	fmt.Printf("  Honest limits: simulated nodes have no kubelet and run no containers. Pods are scheduled and their claims\n")
	fmt.Printf("  allocated for real; the demo then does the kubelet's part (prepare) itself and runs the shim against a fake driver.\n\n")

	step(1, "The node plugins published each GPU as partitionable slices")
	if err := showSlices(ctx, d.client); err != nil {
		return err
	}
	// No storage provisioner runs here: stand in for one so the model volume binds.
	if err := cluster.AddVolumes(ctx, d.client, d.dir, 4, "50Gi"); err != nil {
		return err
	}

	step(2, "tofu init && tofu apply on examples/quickstart (the provider comes from the local filesystem mirror)")
	qs := filepath.Join(d.work, "examples", "quickstart")
	if err := d.cmd(qs, "tofu", "init", "-input=false", "-no-color"); err != nil {
		return err
	}
	if err := d.cmd(qs, "tofu", "apply", "-auto-approve", "-input=false", "-no-color", "-var", "wait_for=scheduled"); err != nil {
		return err
	}

	step(3, "Packages are DeviceClasses selecting slices by driver, model and fraction")
	if err := showPackages(ctx, d.client); err != nil {
		return err
	}

	step(4, "team-a's quota: slices per package (0 for the others) and pooled CPU and RAM, and what is used")
	if err := showQuota(ctx, d.client, "team-a"); err != nil {
		return err
	}

	step(5, "The scheduler allocated Ollama's claim a slice of a real GPU on a node")
	claims, err := allocatedClaims(ctx, d.client, "team-a")
	if err != nil {
		return err
	}
	if len(claims) == 0 {
		return fmt.Errorf("no claim in team-a was allocated")
	}
	for _, c := range claims {
		showClaim(c)
	}

	step(6, "What the node plugin prepares for that claim: one CDI spec with the slice's limits")
	spec, path, err := prepare(ctx, d.state, &claims[0])
	if err != nil {
		return err
	}
	showSpec(spec, path)

	step(7, "nvidia-smi inside the container: the shim reports the slice, not the 32 GiB GPU")
	out, err := nvidiaSMI(d.binDir, spec, d.work)
	if err != nil {
		return err
	}
	indent(out)

	step(8, "A mistaken change fails at plan: a 131072-token context does not fit an 8 GiB slice")
	if err := d.cmd(qs, "tofu", "plan", "-input=false", "-no-color", "-var", "context_length=131072"); err == nil {
		return fmt.Errorf("tofu plan with context_length=131072 succeeded; the fit check should have refused it")
	}
	fmt.Printf("     (tofu plan exited non-zero, as it should: nothing was changed)\n")

	step(9, "Two whole-GPU trainers for team-b, applied with the gpuslice CLI: one gets the free GPU, one waits")
	waiting := filepath.Join("internal", "demo", "waiting")
	if err := d.cmd(d.repo, "gpuslice", "apply", waiting, "-stack", "demo-waiting", "-auto-approve"); err != nil {
		return err
	}
	if err := d.waitForSlice(ctx, waiting); err != nil {
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

// waitForSlice shows `gpuslice status` once one trainer is scheduled and
// the other is diagnosed as waiting for a slice.
func (d *demo) waitForSlice(ctx context.Context, dir string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _ := d.output(d.repo, "gpuslice", "status", dir, "-stack", "demo-waiting")
		if strings.Contains(out, "WaitingForSlice") && strings.Contains(out, "Scheduled") {
			indent(out)
			return nil
		}
		if time.Now().After(deadline) {
			indent(out)
			return fmt.Errorf("no trainer was diagnosed as waiting for a slice within 60 s")
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
