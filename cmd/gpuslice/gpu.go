package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/kube"
	"github.com/gpuslice/gpuslice/engine/maintenance"
)

// clusterFlags select the cluster of a command that reads no
// configuration.
type clusterFlags struct{ kubeconfig, context string }

func (f *clusterFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
}

func (f *clusterFlags) client() (kubernetes.Interface, error) {
	cfg, err := kube.Load(f.kubeconfig, f.context)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// target parses a NODE[/GPU] argument and connects to the cluster.
func (f *clusterFlags) target(arg string) (maintenance.Target, kubernetes.Interface, error) {
	t, err := maintenance.ParseTarget(arg)
	if err != nil {
		return maintenance.Target{}, nil, err
	}
	cs, err := f.client()
	return t, cs, err
}

func newGPUCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "gpu", Short: "List GPUs, drain or undrain them for maintenance (DeviceTaintRules), clear a health taint"}
	cmd.AddCommand(newDrainCommand(), newUndrainCommand(), newGPUListCommand(), newClearCommand())
	return cmd
}

func newDrainCommand() *cobra.Command {
	var f clusterFlags
	var evict bool
	cmd := &cobra.Command{
		Use:   "drain NODE[/GPU]",
		Short: "Taint every device of a node's GPUs, or of one GPU (index or UUID): no new slice lands there; -evict also evicts the pods using them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, cs, err := f.target(args[0])
			if err != nil {
				return err
			}
			d, err := maintenance.Drain(cmd.Context(), cs, t, evict)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			verb := "drained"
			if len(d.Changed) == 0 {
				verb = "already drained"
			}
			fmt.Fprintf(w, "%s %s (%s): %d GPU(s), DeviceTaintRule(s) %s\n", t, verb, d.Effect, len(d.GPUs), strings.Join(d.Rules, ", "))
			if !evict {
				fmt.Fprintln(w, "Pods already using these GPUs keep running; drain with -evict to evict them.")
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&evict, "evict", false, "taint NoExecute: the device taint eviction controller evicts the pods using the GPUs")
	return cmd
}

func newUndrainCommand() *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "undrain NODE[/GPU]",
		Short: "Delete the DeviceTaintRules a drain made: of a node (all of its drains) or of one GPU",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, cs, err := f.target(args[0])
			if err != nil {
				return err
			}
			u, err := maintenance.Undrain(cmd.Context(), cs, t)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s undrained: deleted DeviceTaintRule(s) %s\n", t, strings.Join(u.Rules, ", "))
			if len(u.NodeRules) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "Node %s stays drained as a whole by %s: gpuslice gpu undrain %s lifts it.\n", t.Node, strings.Join(u.NodeRules, ", "), t.Node)
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func newGPUListCommand() *cobra.Command {
	var f clusterFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Each GPU with its health (the node plugin's taint), its drain, its devices' taints and the claims still allocated on it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := f.client()
			if err != nil {
				return err
			}
			gpus, err := maintenance.List(cmd.Context(), cs)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(gpus)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tGPU\tUUID\tMODEL\tHEALTH\tDRAINED\tTAINTED\tTAINTS\tCLAIMS")
			for _, g := range gpus {
				taints := make([]string, len(g.Taints))
				for i, t := range g.Taints {
					taints[i] = t.String()
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", g.Node, g.Index, g.UUID, g.Model, g.Health, dash(string(g.Drained)),
					g.Tainted, g.Devices, dash(strings.Join(taints, "; ")), dash(strings.Join(g.Claims, ", ")))
			}
			return tw.Flush()
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the GPUs as JSON")
	return cmd
}

func newClearCommand() *cobra.Command {
	var f clusterFlags
	var wait time.Duration
	cmd := &cobra.Command{
		Use: "clear NODE[/GPU]",
		Short: "Mark a GPU the node plugin found failing healthy again at once, without waiting for --health-recovery: its " + contract.TaintUnhealthy +
			" taint goes (an annotation on the Node the plugin reads; a fault after the clear taints it again)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, cs, err := f.target(args[0])
			if err != nil {
				return err
			}
			c, err := maintenance.ClearHealth(cmd.Context(), cs, t, time.Now())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(c.GPUs) == 0 {
				fmt.Fprintf(w, "%s: no GPU tainted %s, nothing to clear\n", t, contract.TaintUnhealthy)
				return nil
			}
			for _, g := range c.GPUs {
				fmt.Fprintf(w, "%s/%d (%s): cleared %s=%s\n", g.Node, g.Index, g.UUID, contract.TaintUnhealthy, c.Reasons[g.UUID])
			}
			if wait <= 0 {
				return nil
			}
			took, err := maintenance.WaitUntilUntainted(cmd.Context(), cs, c, wait)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "healthy again: the node plugin untainted them %v after the clear\n", took.Round(time.Millisecond))
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().DurationVar(&wait, "wait", time.Minute, "how long to wait for the node plugin to untaint the GPUs; 0 does not wait")
	return cmd
}
