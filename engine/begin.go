package engine

import (
	"context"
)

// Begin starts the run of a plan of stack before the configuration is
// loaded: the stack's last inventory is read, and with it the kinds and
// namespaces it names, while the caller parses and evaluates the
// configuration (a third of a large plan's time). The next Plan or
// PlanDestroy of that stack continues this run rather than reading the
// cluster afresh; what the configuration adds is read then.
func (e *Engine) Begin(stack string) {
	e.startRun()
	e.begunMu.Lock()
	e.begun = stack
	e.begunMu.Unlock()
	e.view.Go(func(ctx context.Context) {
		if rec, err := e.Inventory.Read(ctx, stack); err == nil {
			e.warmRefs(nil, rec.Refs)
		} // else the plan reads it again and says why
	})
}

// runFor starts a run for stack's plan unless Begin started it.
func (e *Engine) runFor(stack string) {
	e.begunMu.Lock()
	begun := e.begun == stack
	e.begun = ""
	e.begunMu.Unlock()
	if !begun {
		e.startRun()
	}
}
