package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newStatusCommand() *cobra.Command {
	var f stackFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [dir]",
		Short: "Diagnose each workload: running, or why not (waiting for a slice, quota, OOMKilled, image pull, crash loop), which of its slices are unhealthy and why, and the health, taints and slices of the GPUs it uses",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.load(cmd.ErrOrStderr(), dirArg(args))
			if err != nil {
				return err
			}
			e, err := f.engine()
			if err != nil {
				return err
			}
			defer e.Close()
			statuses, err := e.Status(cmd.Context(), c.Stack)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(statuses)
			}
			addrs := make([]string, 0, len(statuses))
			for a := range statuses {
				addrs = append(addrs, a)
			}
			sort.Strings(addrs)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKLOAD\tPHASE\tREASON\tREADY\tNODE\tSLICE\tCLAIM")
			for _, a := range addrs {
				st := statuses[a]
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", a, st.Phase, st.Reason, st.Ready, st.Replicas, dash(st.Node), dash(st.Device), dash(st.Claim))
			}
			tw.Flush()
			for _, a := range addrs {
				if st := statuses[a]; st.Message != "" && st.Reason != "Ready" {
					fmt.Fprintf(cmd.OutOrStdout(), "\n%s: %s", a, st.Message)
				}
			}
			fmt.Fprintln(cmd.OutOrStdout())
			// A tenant may not read the cluster's GPUs (ResourceSlices,
			// DeviceTaintRules, every namespace's claims): its workloads'
			// status stands without them.
			gpus, err := e.GPUStates(cmd.Context())
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "GPUs not shown (they need list on ResourceSlices, DeviceTaintRules and every namespace's ResourceClaims): %v\n", err)
			}
			printUnhealthyDevices(cmd.OutOrStdout(), addrs, statuses, c.Stack, gpus)
			if err != nil {
				return nil
			}
			return printGPUs(cmd.OutOrStdout(), c.Stack, gpus)
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the statuses as JSON")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
