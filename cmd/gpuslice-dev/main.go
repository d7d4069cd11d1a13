// Command gpuslice-dev runs a local Kubernetes cluster for trying and
// showing gpuslice: the control plane built from pinned Go modules, nodes
// with the node plugin, and the narrated demo. It is a command of its own so
// that the gpuslice CLI users install carries none of it; `gpuslice dev …`
// runs this command.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/demo"
	"github.com/gpuslice/gpuslice/internal/devcluster"
)

func main() {
	if err := newDevCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// devFlags are the flags every subcommand shares.
type devFlags struct {
	dir, binDir string
}

// bins is --bin-dir, or the repository's bin/ when it is unset.
func (f *devFlags) bins() string {
	if f.binDir == "" {
		f.binDir = cluster.FindBinDir()
	}
	return f.binDir
}

// nodeFlags are the nodes `up` and `serve` start.
type nodeFlags struct {
	nodes, realNodes, migNodes int
	migGPUs                    string
}

func newDevCommand() *cobra.Command {
	f := &devFlags{}
	dev := &cobra.Command{
		Use:           "gpuslice-dev",
		Short:         "Run a local Kubernetes cluster for trying gpuslice (etcd, kube-apiserver, scheduler, controller-manager; nodes with the node plugin)",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// The printed KUBECONFIG must work from any directory.
			abs, err := filepath.Abs(f.dir)
			f.dir = abs
			return err
		},
	}
	dev.PersistentFlags().StringVar(&f.dir, "dir", devcluster.DefaultDir(), "directory holding the dev cluster's state, logs and kubeconfig")
	dev.PersistentFlags().StringVar(&f.binDir, "bin-dir", "", "directory holding etcd and the kube-* binaries (default: the repository's bin/, built by `make tools`)")
	dev.AddCommand(newUpCommand(f), newServeCommand(f), newDownCommand(f), newEnvCommand(f), newDemoCommand(f), newImageCommand())
	return dev
}

func newUpCommand(f *devFlags) *cobra.Command {
	var n nodeFlags
	up := &cobra.Command{
		Use:   "up",
		Short: "Start the dev cluster in the background (no-op when it is running) and print its KUBECONFIG",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			started := time.Now()
			s, fresh, err := devcluster.Up(cmd.Context(), devcluster.UpOptions{
				Dir: f.dir, BinDir: f.bins(), RealNodes: n.realNodes, SimulatedNodes: n.nodes, MIGNodes: n.migNodes, MIGGPUs: n.migGPUs, ServeArgs: []string{"serve"},
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if fresh {
				fmt.Fprintf(out, "# dev cluster started in %s (control plane %d ms), nodes %v\n",
					time.Since(started).Round(100*time.Millisecond), s.StartupMS, s.Nodes)
			} else {
				fmt.Fprintf(out, "# dev cluster already running (pid %d), nodes %v\n", s.PID, s.Nodes)
			}
			fmt.Fprintln(out, strings.Join(s.Env(), "\n"))
			return nil
		},
	}
	up.Flags().IntVar(&n.realNodes, "real-nodes", 2, "number of real nodes (kubelet, containerd, runc; one simulated V100 each; needs root)")
	up.Flags().IntVar(&n.nodes, "nodes", 0, "number of simulated nodes to register (API objects with a node plugin, no kubelet: pods are scheduled, never run)")
	up.Flags().IntVar(&n.migNodes, "mig-nodes", 0, "number of real nodes with a simulated A100 in MIG mode (--mig-gpus), each running its own node plugin beside the V100 nodes")
	up.Flags().StringVar(&n.migGPUs, "mig-gpus", devcluster.DefaultMIGGPUs, "simulated GPUs of each MIG node, as the node plugin's --simulate takes them")
	return up
}

func newServeCommand(f *devFlags) *cobra.Command {
	var n nodeFlags
	serve := &cobra.Command{
		Use:    "serve",
		Short:  "Run the dev cluster in the foreground (what `dev up` starts in the background)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devcluster.Serve(devcluster.ServeOptions{Dir: f.dir, BinDir: f.bins(), RealNodes: n.realNodes, SimulatedNodes: n.nodes, MIGNodes: n.migNodes, MIGGPUs: n.migGPUs})
		},
	}
	serve.Flags().IntVar(&n.realNodes, "real-nodes", 2, "number of real nodes")
	serve.Flags().IntVar(&n.nodes, "nodes", 0, "number of simulated nodes")
	serve.Flags().IntVar(&n.migNodes, "mig-nodes", 0, "number of real nodes in MIG mode")
	serve.Flags().StringVar(&n.migGPUs, "mig-gpus", devcluster.DefaultMIGGPUs, "simulated GPUs of each MIG node")
	return serve
}

func newDownCommand(f *devFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the dev cluster and every process it started",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stopped, err := devcluster.Down(f.dir, 30*time.Second)
			if err != nil {
				return err
			}
			if stopped {
				fmt.Fprintln(cmd.OutOrStdout(), "dev cluster stopped")
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), "no dev cluster was running")
			}
			return nil
		},
	}
}

func newEnvCommand(f *devFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "env",
		Short: "Print the KUBECONFIG line for the running dev cluster and the quickstart's node-plugin variables (eval \"$(gpuslice dev env)\")",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := devcluster.Running(f.dir)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(s.Env(), "\n"))
			return nil
		},
	}
}

func newDemoCommand(f *devFlags) *cobra.Command {
	var tfCLIConfig string
	demoCmd := &cobra.Command{
		Use:   "demo",
		Short: "Tell the gpuslice story on the running dev cluster (what `make demo` shows)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			binDir := f.bins()
			repo, err := os.Getwd()
			if err != nil {
				return err
			}
			return demo.Run(cmd.Context(), demo.Options{Dir: f.dir, BinDir: binDir, Repo: repo, TFCLIConfig: tfCLIConfig})
		},
	}
	demoCmd.Flags().StringVar(&tfCLIConfig, "tf-cli-config", "", "OpenTofu CLI configuration naming the local provider mirror (make install writes it)")
	return demoCmd
}
