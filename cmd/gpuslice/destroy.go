package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/lock"
	"github.com/gpuslice/gpuslice/engine/plan"
)

func newDestroyCommand() *cobra.Command {
	var f stackFlags
	var autoApprove bool
	var lf lockFlags
	cmd := &cobra.Command{
		Use:   "destroy [dir]",
		Short: "Remove every object the stack applied (tenant namespaces keep existing; gpuslice's labels go)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			c, err := f.load(stderr, dirArg(args))
			if err != nil {
				return err
			}
			e, err := f.engine()
			if err != nil {
				return err
			}
			defer e.Close()
			w, err := lf.startWriting(cmd, stderr, e, c.Stack.Name, "gpuslice destroy", dirArg(args))
			if err != nil {
				return err
			}
			defer w.end()
			stop := w.ctx
			p, err := e.PlanDestroy(stop, c.Stack.Name)
			if err != nil {
				return err
			}
			printDiags(cmd.ErrOrStderr(), p.Diagnostics)
			if p.Diagnostics.HasErrors() {
				return errReported
			}
			p.WriteText(out)
			if !p.HasChanges() {
				return e.Inventory.Delete(cmd.Context(), c.Stack.Name, p.InventoryVersion)
			}
			ok, err := confirm(cmd, autoApprove, "Do you really want to destroy everything stack "+c.Stack.Name+" applied?")
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("destroy cancelled")
			}
			start := time.Now()
			w.started()
			if err := e.Destroy(cmd.Context(), p, apply.Options{Progress: progressPrinter(out), Stop: stop,
				Writer: plan.Writer{Who: lock.Me() + " (gpuslice destroy)"}}); err != nil {
				return err
			}
			fmt.Fprintf(out, "\nDestroy complete in %s: %d destroyed, %d released.\n", time.Since(start).Round(100*time.Millisecond), p.Count(plan.Delete), p.Count(plan.Release))
			return nil
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&autoApprove, "auto-approve", false, "destroy without asking")
	lf.register(cmd)
	return cmd
}
