package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuslice/gpuslice/engine"
)

func newValidateCommand() *cobra.Command {
	var f stackFlags
	cmd := &cobra.Command{
		Use:   "validate [dir]",
		Short: "Check a configuration without contacting a cluster",
		Long:  "Validates the configuration and runs the plan-time checks that need no cluster (image vs GPU generation, container RAM, model and context vs slice, model storage). plan runs them all.",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.load(cmd.ErrOrStderr(), dirArg(args))
			if err != nil {
				return err
			}
			s := c.Stack
			// The checks that need no cluster: image, container RAM, model fit, storage.
			diags := engine.CheckOffline(s, f.tableSet)
			for i, d := range diags {
				diags[i] = c.Locate(d)
			}
			printDiags(cmd.ErrOrStderr(), diags)
			if diags.HasErrors() {
				return errReported
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Success! The configuration is valid: stack %s, %d packages, %d quotas, %d workloads.\n",
				s.Name, len(s.Packages), len(s.Quotas), len(s.Workloads))
			return nil
		},
	}
	f.register(cmd, false)
	return cmd
}
