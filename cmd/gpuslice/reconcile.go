package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/lock"
	"github.com/gpuslice/gpuslice/engine/plan"
)

func newReconcileCommand() *cobra.Command {
	var r reconciler
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
			e, err := r.f.engine()
			if err != nil {
				return err
			}
			// One engine for every round: its view of the cluster is listed
			// once and kept current by watches, so a round re-reads nothing;
			// a change made moments before a round shows in the next one.
			e.Continuous = true
			defer e.Close()
			for {
				err := r.round(ctx, cmd, e, dirArg(args))
				if r.once {
					return err
				}
				if err != nil && err != errReported {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s reconcile failed, retrying in %s: %v\n", time.Now().Format(time.RFC3339), r.interval, err)
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(r.interval):
				}
			}
		},
	}
	r.f.register(cmd, true)
	cmd.Flags().DurationVar(&r.interval, "interval", 30*time.Second, "time between rounds")
	cmd.Flags().BoolVar(&r.once, "once", false, "run one round and exit (its error, if any, is the exit status)")
	cmd.Flags().BoolVar(&r.force, "force-conflicts", false, "take over fields that another server-side applier manages")
	r.lf.register(cmd)
	return cmd
}

// reconciler is `gpuslice reconcile` as its flags configure it.
type reconciler struct {
	f           stackFlags
	lf          lockFlags
	interval    time.Duration
	once, force bool
}

// round reads the configuration in dir, plans it and applies any
// difference, under the stack's lock.
func (r *reconciler) round(ctx context.Context, cmd *cobra.Command, e *engine.Engine, dir string) error {
	out := cmd.OutOrStdout()
	c, err := r.f.load(cmd.ErrOrStderr(), dir)
	if err != nil {
		return err
	}
	e.Tables = r.f.tableSet
	// The lock per round, never between rounds: a human's apply
	// goes in between, and this round waits for it (up to
	// -lock-timeout) or skips.
	lk, err := r.lf.acquire(ctx, cmd.ErrOrStderr(), e, c.Stack.Name, "gpuslice reconcile", dir)
	var heldErr *lock.HeldError
	if errors.As(err, &heldErr) && !r.once {
		fmt.Fprintf(out, "%s stack %s: locked by %s (%s) since %s; skipping this round\n", time.Now().Format(time.RFC3339),
			c.Stack.Name, heldErr.Holder.Who, heldErr.Holder.Operation, heldErr.Holder.Created.Local().Format(time.RFC3339))
		return nil
	}
	if err != nil {
		return err
	}
	defer lk.release()
	stop, cancelStop := lk.stop(ctx)
	defer cancelStop()
	p, err := planStack(stop, e, c, plan.Options{})
	if err != nil {
		return err
	}
	printDiags(cmd.ErrOrStderr(), p.Diagnostics)
	if !p.HasChanges() {
		fmt.Fprintf(out, "%s stack %s: in sync\n", time.Now().Format(time.RFC3339), c.Stack.Name)
		return nil
	}
	// Never revert an apply made from a newer configuration than
	// the directory's (the Git sync has not caught up).
	mine := configTime(dir)
	if last := p.Last; !last.ConfigTime.IsZero() && last.ConfigTime.After(mine) && last.Digest != "" && last.Digest != p.Digest() {
		return fmt.Errorf("stack %s was applied by %s at %s from a configuration newer (changed %s) than %s's (changed %s); "+
			"reconcile does not revert it: let the Git sync bring that configuration, or apply %s by hand to go back",
			c.Stack.Name, last.Who, last.At.Local().Format(time.RFC3339), last.ConfigTime.Local().Format(time.RFC3339), dir, mine.Local().Format(time.RFC3339), dir)
	}
	p.WriteText(out)
	opts := apply.Options{ForceConflicts: r.force, Progress: progressPrinter(out), Stop: stop,
		Writer: plan.Writer{Who: lock.Me() + " (gpuslice reconcile)", ConfigTime: mine}}
	if err := e.Apply(cmd.Context(), p, opts); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s stack %s: reconciled (%d added, %d changed, %d replaced, %d destroyed)\n", time.Now().Format(time.RFC3339),
		c.Stack.Name, p.Count(plan.Create), p.Count(plan.Update), p.Count(plan.Replace), p.Count(plan.Delete))
	return nil
}
