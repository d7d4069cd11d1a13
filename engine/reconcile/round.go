package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/lock"
	"github.com/gpuslice/gpuslice/engine/plan"
)

// Reconciler runs rounds: fetch the source, load, lock, plan, apply.
type Reconciler struct {
	// Engine must be Continuous: one view of the cluster for every round.
	Engine *engine.Engine
	Source Source
	// Load reads the configuration in a revision's directory.
	Load func(dir string) (*hclstack.Config, diag.Diagnostics)
	// Stack names the stack before its configuration loads, so that a
	// round failing to fetch or load still reports in its status; ""
	// reports only rounds that loaded.
	Stack string
	// NoLock skips the stack's state lock (-lock=false).
	NoLock bool
	// LockTimeout is how long a round waits for another writer's lock
	// before it is skipped.
	LockTimeout    time.Duration
	ForceConflicts bool
	// Out gets each round's outcome and plan, Err diagnostics and
	// warnings.
	Out, Err io.Writer
	// Status and Metrics, when set, get every round's Result.
	Status  *Status
	Metrics *Metrics
}

// Result is how a round ended.
type Result struct {
	Stack    string
	Revision Revision
	// InSync is true when the round left the cluster matching the
	// configuration: nothing to apply, or applied.
	InSync bool
	// Applied is the plan applied; nil when there was nothing to apply.
	Applied *plan.Plan
	// Locked is set when another writer held the stack's lock: the round
	// was skipped.
	Locked *lock.HeldError
	Err    error
	At     time.Time
}

// Round runs one round and reports it to Status and Metrics.
func (r *Reconciler) Round(ctx context.Context) Result {
	res := r.round(ctx)
	res.At = time.Now()
	if res.Stack == "" {
		res.Stack = r.Stack
	}
	if res.Stack == "" {
		return res
	}
	r.Metrics.observe(res.Stack, res)
	if r.Status != nil {
		if err := r.Status.Record(ctx, r.Source.String(), res); err != nil {
			fmt.Fprintf(r.Err, "Warning: %v\n", err)
		}
	}
	return res
}

// Run runs a round every interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context, interval time.Duration) {
	for {
		res := r.Round(ctx)
		if res.Err != nil {
			fmt.Fprintf(r.Err, "%s reconcile failed, retrying in %s: %v\n", res.At.Format(time.RFC3339), interval, res.Err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func (r *Reconciler) round(ctx context.Context) Result {
	res := Result{Stack: r.Stack}
	rev, err := r.Source.Fetch(ctx)
	res.Revision = rev
	if err != nil {
		res.Err = err
		return res
	}
	c, diags := r.Load(rev.Dir)
	rev.relative(diags)
	for _, d := range diags {
		fmt.Fprintf(r.Err, "%s: %s\n", d.Severity, d.Error())
	}
	if diags.HasErrors() {
		res.Err = fmt.Errorf("configuration of %s at %s: %w", r.Source, revName(rev), diags.Err())
		return res
	}
	res.Stack = c.Stack.Name
	l, err := r.lock(ctx, c.Stack.Name)
	if errors.As(err, &res.Locked) {
		h := res.Locked.Holder
		fmt.Fprintf(r.Out, "%s stack %s: locked by %s (%s) since %s; skipping this round\n", time.Now().Format(time.RFC3339),
			c.Stack.Name, h.Who, h.Operation, h.Created.Local().Format(time.RFC3339))
		return res
	}
	if err != nil {
		res.Err = err
		return res
	}
	defer r.release(l)
	stop, cancelStop := context.WithCancel(ctx)
	if l != nil {
		stop, cancelStop = l.Context(ctx)
	}
	defer cancelStop()
	res.Applied, res.Err = r.planApply(stop, c, rev)
	res.InSync = res.Err == nil
	return res
}

// planApply plans c and applies any difference.
func (r *Reconciler) planApply(stop context.Context, c *hclstack.Config, rev Revision) (*plan.Plan, error) {
	e, name := r.Engine, c.Stack.Name
	p, err := e.Plan(stop, c.Stack, plan.Options{})
	if err != nil {
		return nil, err
	}
	for i, d := range p.Diagnostics {
		p.Diagnostics[i] = c.Locate(d)
	}
	rev.relative(p.Diagnostics)
	for _, d := range p.Diagnostics {
		fmt.Fprintf(r.Err, "%s: %s\n", d.Severity, d.Error())
	}
	if !p.HasChanges() {
		fmt.Fprintf(r.Out, "%s stack %s: in sync at %s\n", time.Now().Format(time.RFC3339), name, revName(rev))
		return nil, nil
	}
	// Never revert an apply made from a newer configuration than this
	// revision's (the source has not caught up with someone's apply).
	if last := p.Last; !last.ConfigTime.IsZero() && last.ConfigTime.After(rev.Time) && last.Digest != "" && last.Digest != p.Digest() {
		return nil, fmt.Errorf("stack %s was applied by %s at %s from a configuration newer (changed %s) than %s at %s (changed %s); "+
			"reconcile does not revert it: bring that configuration to the source, or apply this one by hand to go back",
			name, last.Who, last.At.Local().Format(time.RFC3339), last.ConfigTime.Local().Format(time.RFC3339), r.Source, revName(rev), rev.Time.Local().Format(time.RFC3339))
	}
	p.WriteText(r.Out)
	who := lock.Me() + " (gpuslice reconcile)"
	if rev.ID != "" {
		who = lock.Me() + " (gpuslice reconcile " + shortRev(rev.ID) + ")"
	}
	// The apply itself runs to its end on a cancelled ctx: stop asks it
	// to halt between writes instead.
	opts := apply.Options{ForceConflicts: r.ForceConflicts, Stop: stop, Writer: plan.Writer{Who: who, ConfigTime: rev.Time}}
	if err := e.Apply(context.WithoutCancel(stop), p, opts); err != nil {
		return nil, err
	}
	fmt.Fprintf(r.Out, "%s stack %s: reconciled to %s (%s)\n", time.Now().Format(time.RFC3339), name, revName(rev), counts(p))
	return p, nil
}

func (r *Reconciler) lock(ctx context.Context, stack string) (*lock.Lock, error) {
	if r.NoLock {
		fmt.Fprintf(r.Err, "Warning: -lock=false: stack %s is not locked; do not run two writers of one stack at once.\n", stack)
		return nil, nil
	}
	l, err := r.Engine.Locks().Acquire(ctx, stack, lock.Options{Operation: "gpuslice reconcile", Path: r.Source.String(),
		Timeout: r.LockTimeout, Waiting: lock.Waiting(r.Err, stack, r.LockTimeout)})
	if err != nil {
		return nil, err
	}
	lock.WarnTookOver(r.Err, l)
	return l, nil
}

func (r *Reconciler) release(l *lock.Lock) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		fmt.Fprintf(r.Err, "Warning: releasing the state lock of stack %s failed: %v\n", l.Stack(), err)
	}
}

func counts(p *plan.Plan) string {
	return fmt.Sprintf("%d added, %d changed, %d replaced, %d destroyed",
		p.Count(plan.Create), p.Count(plan.Update), p.Count(plan.Replace), p.Count(plan.Delete))
}

func revName(rev Revision) string {
	if rev.ID == "" {
		return "its current files"
	}
	return "revision " + shortRev(rev.ID)
}

func shortRev(id string) string {
	if len(id) > 12 && !strings.Contains(id, ":") {
		return id[:12]
	}
	return id
}
