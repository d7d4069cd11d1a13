package main

import (
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/plan"
)

func newReconcileCommand() *cobra.Command {
	var f stackFlags
	var interval time.Duration
	var once, force bool
	cmd := &cobra.Command{
		Use:   "reconcile [dir]",
		Short: "GitOps mode: re-read the configuration, plan and apply on a loop, correcting drift",
		Long: "Every -interval, reads the directory again (pick up what your Git sync wrote), plans against the cluster and applies " +
			"any difference without asking, so out-of-band edits are reverted. Errors are printed and retried on the next round. " +
			"Stops on SIGINT or SIGTERM.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			e, err := f.engine()
			if err != nil {
				return err
			}
			// One engine for every round: its view of the cluster is listed
			// once and kept current by watches, so a round re-reads nothing;
			// a change made moments before a round shows in the next one.
			e.Continuous = true
			defer e.Close()
			round := func() error {
				c, err := f.load(cmd.ErrOrStderr(), dirArg(args))
				if err != nil {
					return err
				}
				e.Tables = f.tableSet
				p, err := planStack(ctx, e, c, plan.Options{})
				if err != nil {
					return err
				}
				printDiags(cmd.ErrOrStderr(), p.Diagnostics)
				if !p.HasChanges() {
					fmt.Fprintf(out, "%s stack %s: in sync\n", time.Now().Format(time.RFC3339), c.Stack.Name)
					return nil
				}
				p.WriteText(out)
				if err := e.Apply(ctx, p, apply.Options{ForceConflicts: force, Progress: progressPrinter(out)}); err != nil {
					return err
				}
				fmt.Fprintf(out, "%s stack %s: reconciled (%d added, %d changed, %d replaced, %d destroyed)\n", time.Now().Format(time.RFC3339),
					c.Stack.Name, p.Count(plan.Create), p.Count(plan.Update), p.Count(plan.Replace), p.Count(plan.Delete))
				return nil
			}
			for {
				err := round()
				if once {
					return err
				}
				if err != nil && err != errReported {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s reconcile failed, retrying in %s: %v\n", time.Now().Format(time.RFC3339), interval, err)
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	f.register(cmd, true)
	cmd.Flags().DurationVar(&interval, "interval", 30*time.Second, "time between rounds")
	cmd.Flags().BoolVar(&once, "once", false, "run one round and exit (its error, if any, is the exit status)")
	cmd.Flags().BoolVar(&force, "force-conflicts", false, "take over fields that another server-side applier manages")
	return cmd
}
