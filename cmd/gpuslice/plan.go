package main

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/plan"
)

// exitChanges is plan -detailed-exitcode's answer when there are changes.
const exitChanges = 2

type exitCode int

func (e exitCode) Error() string { return "plan has changes" }

func newPlanCommand() *cobra.Command {
	var f stackFlags
	var detailed, asJSON, adopt bool
	cmd := &cobra.Command{
		Use:   "plan [dir]",
		Short: "Show what apply would change in the cluster",
		Long: "Compares the objects the configuration renders with the live cluster (one list per kind and namespace) and prints, " +
			"like terraform plan, what would be created (+), updated in place (~, field by field), replaced (-/+), or destroyed (-).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The cluster is read while the configuration loads; its
			// errors come first all the same.
			e, engineErr := f.engine()
			if engineErr == nil {
				defer e.Close()
				if abs, err := filepath.Abs(dirArg(args)); err == nil {
					if name, d := hclstack.StackName(f.stack, abs); d == nil {
						e.Begin(name)
					}
				}
			}
			c, err := f.load(cmd.ErrOrStderr(), dirArg(args))
			if err != nil {
				return err
			}
			if engineErr != nil {
				return engineErr
			}
			p, err := planStack(cmd.Context(), e, c, plan.Options{Adopt: adopt})
			if err != nil {
				return err
			}
			if asJSON {
				if err := p.WriteJSON(cmd.OutOrStdout(), p.Diagnostics); err != nil {
					return err
				}
			} else {
				printDiags(cmd.ErrOrStderr(), p.Diagnostics)
				p.WriteText(cmd.OutOrStdout())
			}
			if p.Diagnostics.HasErrors() {
				return errReported
			}
			if detailed && p.HasChanges() {
				return exitCode(exitChanges)
			}
			return nil
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 0 with no changes, 2 with changes, 1 on error")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().BoolVar(&adopt, "adopt", false, "take over objects in the way that no gpuslice stack owns")
	return cmd
}
