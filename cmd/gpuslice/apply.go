package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/lock"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/reconcile"
	"github.com/gpuslice/gpuslice/engine/status"
)

func newApplyCommand() *cobra.Command {
	var a applier
	cmd := &cobra.Command{
		Use:   "apply [dir]",
		Short: "Plan, then change the cluster to match the configuration and wait for the workloads",
		Args:  cobra.MaximumNArgs(1),
		RunE:  a.run,
	}
	a.f.register(cmd, true)
	fl := cmd.Flags()
	fl.BoolVar(&a.autoApprove, "auto-approve", false, "apply without asking")
	fl.BoolVar(&a.force, "force-conflicts", false, "take over fields that another server-side applier manages")
	fl.BoolVar(&a.adopt, "adopt", false, "take over objects in the way that no gpuslice stack owns")
	fl.BoolVar(&a.noWait, "no-wait", false, "do not wait for workloads (their wait_for is ignored)")
	fl.IntVar(&a.concurrency, "parallelism", 8, "objects applied at once within a level")
	fl.BoolVar(&a.replan, "replan", false, "if the cluster changed between the plan and the apply (the stale-plan check), apply a fresh plan instead of stopping")
	a.lf.register(cmd)
	return cmd
}

// applier is `gpuslice apply` as its flags configure it.
type applier struct {
	f                                         stackFlags
	lf                                        lockFlags
	autoApprove, force, adopt, noWait, replan bool
	concurrency                               int
}

func (a *applier) run(cmd *cobra.Command, args []string) error {
	out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	c, err := a.f.load(stderr, dirArg(args))
	if err != nil {
		return err
	}
	e, err := a.f.engine()
	if err != nil {
		return err
	}
	defer e.Close()
	// Plan and apply under one lock: nobody else writes the stack
	// between the plan shown and the apply.
	w, err := a.lf.startWriting(cmd, stderr, e, c.Stack.Name, "gpuslice apply", dirArg(args))
	if err != nil {
		return err
	}
	defer w.end()
	p, err := planStack(w.ctx, e, c, plan.Options{Adopt: a.adopt})
	if err != nil {
		return err
	}
	printDiags(stderr, p.Diagnostics)
	if p.Diagnostics.HasErrors() {
		return errReported
	}
	p.WriteText(out)
	if p.HasChanges() {
		if err := a.applyPlan(cmd, e, w, p, dirArg(args)); err != nil {
			return err
		}
	}
	// Waiting only reads: the lock goes back first, so a reconcile
	// loop or a colleague need not wait for our workloads.
	w.lock.release()
	statuses := map[string]status.Status{}
	if wait := engine.Changed(c.Stack, p); len(wait) > 0 && !a.noWait {
		fmt.Fprintf(out, "\nWaiting for %d workload(s)…\n", len(wait))
		statuses, err = e.Wait(w.intr.ctx, wait, func(addr string, st status.Status) {
			fmt.Fprintf(out, "  %s: %s (%s) %s\n", addr, st.Phase, st.Reason, st.Message)
		})
		if err != nil {
			return err
		}
	}
	printOutputs(out, c, statuses)
	return nil
}

// applyPlan asks, unless -auto-approve, and applies p, made from the
// configuration in dir, under w's lock.
func (a *applier) applyPlan(cmd *cobra.Command, e *engine.Engine, w *writing, p *plan.Plan, dir string) error {
	out := cmd.OutOrStdout()
	ok, err := confirm(cmd, a.autoApprove, "Do you want to perform these actions?")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("apply cancelled")
	}
	fmt.Fprintln(out)
	start := time.Now()
	w.started()
	opts := apply.Options{ForceConflicts: a.force, Concurrency: a.concurrency, Progress: progressPrinter(out), Stop: w.ctx,
		Writer: plan.Writer{Who: lock.Me() + " (gpuslice apply)", ConfigTime: reconcile.ConfigTime(dir)}}
	if a.replan {
		opts.Replanned = func(fresh *plan.Plan) {
			fmt.Fprintf(out, "The cluster changed since the plan above (-replan): applying a fresh plan:\n\n")
			fresh.WriteText(out)
			fmt.Fprintln(out)
		}
	}
	// Requests use the command's context, not stop: a write in
	// flight finishes even after Ctrl-C.
	if err := e.Apply(cmd.Context(), p, opts); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nApply complete in %s: %d added, %d changed, %d replaced, %d destroyed, %d released.\n",
		time.Since(start).Round(100*time.Millisecond), p.Count(plan.Create), p.Count(plan.Update), p.Count(plan.Replace), p.Count(plan.Delete), p.Count(plan.Release))
	return nil
}

func progressPrinter(w io.Writer) func(apply.Event) {
	return func(ev apply.Event) {
		verb := map[plan.Action]string{plan.Create: "created", plan.Update: "updated", plan.Replace: "replaced", plan.Delete: "destroyed", plan.Release: "released"}[ev.Action]
		if ev.Err != nil {
			fmt.Fprintf(w, "  %s: %s failed: %v\n", ev.Address, ev.Ref, ev.Err)
			return
		}
		note := ""
		if len(ev.Restored) > 0 {
			note = fmt.Sprintf(" (restored fields changed by %v)", ev.Restored)
		}
		fmt.Fprintf(w, "  %s: %s %s [%s]%s\n", ev.Address, ev.Ref, verb, ev.Duration.Round(time.Millisecond), note)
	}
}

// printOutputs prints the configuration's outputs, filling in what apply
// learned (a workload's node, claim and device).
func printOutputs(w io.Writer, c *hclstack.Config, statuses map[string]status.Status) {
	if len(c.Outputs) == 0 {
		return
	}
	known := map[string]map[string]string{}
	for addr, st := range statuses {
		known[addr] = st.Attributes()
	}
	values, diags := c.EvalOutputs(known)
	if diags.HasErrors() {
		fmt.Fprintf(w, "\nOutputs could not be evaluated: %v\n", diags.Err())
		return
	}
	fmt.Fprintf(w, "\nOutputs:\n\n")
	for _, o := range values {
		fmt.Fprintf(w, "%s = %s\n", o.Name, showValue(o))
	}
}

func showValue(o hclstack.Output) string {
	switch {
	case o.Sensitive:
		return "(sensitive value)"
	case !o.Value.IsWhollyKnown():
		return "(known after apply)"
	case o.Value.IsNull():
		return "null"
	case o.Value.Type() == cty.String:
		return fmt.Sprintf("%q", o.Value.AsString())
	}
	data, err := ctyjson.Marshal(o.Value, o.Value.Type())
	if err != nil {
		return o.Value.GoString()
	}
	return string(data)
}
