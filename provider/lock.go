package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/lock"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// writeContext is the context the engine's writes use. Terraform cancels
// ctx on Ctrl-C; passed as apply.Options.Stop, that stops the apply from
// starting writes, while the writes in flight finish (within the
// operation's timeout) and the inventory records what was done.
func writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	w := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(w, d)
	}
	return context.WithCancel(w)
}

// lockResource takes the state lock of the resource's stack, the lock
// `gpuslice apply` takes, for one Create, Update or Delete: two writers of
// one resource (two workspaces, or the CLI) never interleave. It fails at
// once when another writer holds it, like Terraform's default
// -lock-timeout. The returned function releases it.
func lockResource(ctx context.Context, e *engine.Engine, r spec.Resource, operation string) (func(), error) {
	stack := r.StackName()
	l, err := e.Locks().Acquire(ctx, stack, lock.Options{Operation: "terraform " + operation + " (" + r.Addr() + ")", Path: r.ID()})
	var held *lock.HeldError
	if errors.As(err, &held) {
		held.Hint = fmt.Sprintf("Another writer is changing this resource's objects (stack %s). Wait for it to finish and apply again. "+
			"If the holder is gone (killed, crashed), apply again in %s: a lock that looks abandoned is watched and taken over once it stays unrenewed that long; `gpuslice force-unlock %s` removes it at once.",
			stack, held.Holder.Duration.Round(time.Second), stack)
		return nil, held
	}
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Release(ctx) // if this fails, the next writer takes it over once unrenewed
	}, nil
}
