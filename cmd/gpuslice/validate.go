package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newValidateCommand() *cobra.Command {
	var f stackFlags
	cmd := &cobra.Command{
		Use:   "validate [dir]",
		Short: "Check a configuration without contacting a cluster",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.load(cmd.ErrOrStderr(), dirArg(args))
			if err != nil {
				return err
			}
			s := c.Stack
			fmt.Fprintf(cmd.OutOrStdout(), "Success! The configuration is valid: stack %s, %d packages, %d quotas, %d workloads.\n",
				s.Name, len(s.Packages), len(s.Quotas), len(s.Workloads))
			return nil
		},
	}
	f.register(cmd, false)
	return cmd
}
