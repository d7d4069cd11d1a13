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

func newDevCommand() *cobra.Command {
	var dir, binDir string
	dev := &cobra.Command{
		Use:           "gpuslice-dev",
		Short:         "Run a local Kubernetes cluster for trying gpuslice (etcd, kube-apiserver, scheduler, controller-manager; nodes with the node plugin)",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// The printed KUBECONFIG must work from any directory.
			abs, err := filepath.Abs(dir)
			dir = abs
			return err
		},
	}
	dev.PersistentFlags().StringVar(&dir, "dir", devcluster.DefaultDir(), "directory holding the dev cluster's state, logs and kubeconfig")
	dev.PersistentFlags().StringVar(&binDir, "bin-dir", "", "directory holding etcd and the kube-* binaries (default: the repository's bin/, built by `make tools`)")

	var nodes, realNodes, migNodes int
	var migGPUs string
	up := &cobra.Command{
		Use:   "up",
		Short: "Start the dev cluster in the background (no-op when it is running) and print its KUBECONFIG",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if binDir == "" {
				binDir = cluster.FindBinDir()
			}
			started := time.Now()
			s, fresh, err := devcluster.Up(cmd.Context(), devcluster.UpOptions{
				Dir: dir, BinDir: binDir, RealNodes: realNodes, SimulatedNodes: nodes, MIGNodes: migNodes, MIGGPUs: migGPUs, ServeArgs: []string{"serve"},
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
	up.Flags().IntVar(&realNodes, "real-nodes", 2, "number of real nodes (kubelet, containerd, runc; one simulated V100 each; needs root)")
	up.Flags().IntVar(&nodes, "nodes", 0, "number of simulated nodes to register (API objects with a node plugin, no kubelet: pods are scheduled, never run)")
	up.Flags().IntVar(&migNodes, "mig-nodes", 0, "number of real nodes with a simulated A100 in MIG mode (--mig-gpus), each running its own node plugin beside the V100 nodes")
	up.Flags().StringVar(&migGPUs, "mig-gpus", devcluster.DefaultMIGGPUs, "simulated GPUs of each MIG node, as the node plugin's --simulate takes them")

	serve := &cobra.Command{
		Use:    "serve",
		Short:  "Run the dev cluster in the foreground (what `dev up` starts in the background)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if binDir == "" {
				binDir = cluster.FindBinDir()
			}
			return devcluster.Serve(devcluster.ServeOptions{Dir: dir, BinDir: binDir, RealNodes: realNodes, SimulatedNodes: nodes, MIGNodes: migNodes, MIGGPUs: migGPUs})
		},
	}
	serve.Flags().IntVar(&realNodes, "real-nodes", 2, "number of real nodes")
	serve.Flags().IntVar(&nodes, "nodes", 0, "number of simulated nodes")
	serve.Flags().IntVar(&migNodes, "mig-nodes", 0, "number of real nodes in MIG mode")
	serve.Flags().StringVar(&migGPUs, "mig-gpus", devcluster.DefaultMIGGPUs, "simulated GPUs of each MIG node")

	down := &cobra.Command{
		Use:   "down",
		Short: "Stop the dev cluster and every process it started",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stopped, err := devcluster.Down(dir, 30*time.Second)
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

	env := &cobra.Command{
		Use:   "env",
		Short: "Print the KUBECONFIG line for the running dev cluster and the quickstart's node-plugin variables (eval \"$(gpuslice dev env)\")",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := devcluster.Running(dir)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(s.Env(), "\n"))
			return nil
		},
	}
	var tfCLIConfig string
	demoCmd := &cobra.Command{
		Use:   "demo",
		Short: "Tell the gpuslice story on the running dev cluster (what `make demo` shows)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if binDir == "" {
				binDir = cluster.FindBinDir()
			}
			repo, err := os.Getwd()
			if err != nil {
				return err
			}
			return demo.Run(cmd.Context(), demo.Options{Dir: dir, BinDir: binDir, Repo: repo, TFCLIConfig: tfCLIConfig})
		},
	}
	demoCmd.Flags().StringVar(&tfCLIConfig, "tf-cli-config", "", "OpenTofu CLI configuration naming the local provider mirror (make install writes it)")
	dev.AddCommand(up, serve, down, env, demoCmd, newImageCommand())
	return dev
}
