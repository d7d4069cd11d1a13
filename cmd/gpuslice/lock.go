package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/lock"
)

// lockFlags are Terraform's -lock and -lock-timeout.
type lockFlags struct {
	lock    bool
	timeout time.Duration
}

func (lf *lockFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&lf.lock, "lock", true, "hold the stack's state lock while planning and applying; -lock=false skips it (not recommended: two writers then only detect each other through the inventory's version)")
	cmd.Flags().DurationVar(&lf.timeout, "lock-timeout", 0, "how long to wait for the stack's state lock when another writer holds it (default 0s: fail at once)")
}

// held is a state lock this command holds (or none, with -lock=false).
type held struct {
	l      *lock.Lock
	stderr io.Writer
}

// acquire takes the stack's state lock for operation, waiting up to
// -lock-timeout; waiting, when set, is told that it waits and for whom.
func (lf *lockFlags) acquire(ctx context.Context, stderr io.Writer, e *engine.Engine, stack, operation, dir string) (*held, error) {
	if !lf.lock {
		fmt.Fprintf(stderr, "Warning: -lock=false: stack %s is not locked. Another writer applying it at the same time is only detected through the inventory's version; do not run two writers of one stack at once.\n\n", stack)
		return &held{stderr: stderr}, nil
	}
	path, _ := filepath.Abs(dir)
	l, err := e.Locks().Acquire(ctx, stack, lock.Options{Operation: operation, Path: path, Timeout: lf.timeout, Waiting: lock.Waiting(stderr, stack, lf.timeout)})
	if err != nil {
		return nil, err
	}
	lock.WarnTookOver(stderr, l)
	return &held{l: l, stderr: stderr}, nil
}

// stop returns a context done when the lock is lost (force-unlock, or
// renewals failing), with the reason as its cause; parent's end too.
func (h *held) stop(parent context.Context) (context.Context, context.CancelFunc) {
	if h.l == nil {
		return context.WithCancel(parent)
	}
	return h.l.Context(parent)
}

// release gives the lock back; when that fails it says how it ends.
func (h *held) release() {
	if h == nil || h.l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.l.Release(ctx); err != nil {
		fmt.Fprintf(h.stderr, "Warning: releasing the state lock of stack %s failed: %v\n", h.l.Stack(), err)
	}
}

func newForceUnlockCommand() *cobra.Command {
	var f stackFlags
	var force bool
	cmd := &cobra.Command{
		Use:   "force-unlock STACK",
		Short: "Remove a stack's state lock whoever holds it (only when its holder is gone)",
		Long: "Removes the stack's state lock, like terraform force-unlock. Only do this when the holder is gone (killed, its machine lost): " +
			"a holder still running notices at its next renewal and stops applying. A holder that stopped renewing loses its lock by itself: the next writer takes it over after watching it unrenewed for its duration (15 s).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stack := args[0]
			e, err := f.engine()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			holder, err := e.Locks().Holder(cmd.Context(), stack)
			if err != nil {
				return err
			}
			if holder == nil {
				fmt.Fprintf(out, "Stack %s is not locked.\n", stack)
				return nil
			}
			fmt.Fprintf(out, "The state lock of stack %s:\n%s\n", stack, holder.Describe(time.Now()))
			ok, err := confirm(cmd, force, "Do you really want to force-unlock? gpuslice will remove the lock whoever holds it; a writer still running stops at its next renewal.")
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("force-unlock cancelled")
			}
			if _, err := e.Locks().ForceUnlock(cmd.Context(), stack); err != nil {
				return err
			}
			fmt.Fprintf(out, "gpuslice state of stack %s has been successfully unlocked!\n", stack)
			return nil
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&force, "force", false, "do not ask for confirmation")
	return cmd
}

// writing is what apply and destroy hold from their plan to their last
// write: Ctrl-C handling and the stack's state lock. ctx ends on an
// interrupt or when the lock is lost.
type writing struct {
	intr   *interrupts
	lock   *held
	ctx    context.Context
	cancel context.CancelFunc
}

// startWriting takes the stack's lock for operation. Until the first write
// (writing.started), an interrupt releases the lock and exits at once.
func (lf *lockFlags) startWriting(cmd *cobra.Command, stderr io.Writer, e *engine.Engine, stack, operation, dir string) (*writing, error) {
	intr := newInterrupts(cmd.Context(), stderr, "gpuslice")
	intr.beforeWriting(func() {})
	lk, err := lf.acquire(intr.ctx, stderr, e, stack, operation, dir)
	if err != nil {
		intr.stop()
		return nil, err
	}
	intr.beforeWriting(lk.release)
	ctx, cancel := lk.stop(intr.ctx)
	return &writing{intr: intr, lock: lk, ctx: ctx, cancel: cancel}, nil
}

// started makes interrupts graceful stops: writes are under way.
func (w *writing) started() { w.intr.beforeWriting(nil) }

// end releases the lock and stops listening for interrupts.
func (w *writing) end() {
	w.cancel()
	w.lock.release()
	w.intr.stop()
}
