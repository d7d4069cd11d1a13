package apply

import (
	"context"
	"errors"
	"sync"

	"github.com/gpuslice/gpuslice/engine/internal/inventory"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
)

// What one apply has done, and whether it must stop starting writes.

// run is what one apply has done so far.
type run struct {
	p       *plan.Plan
	total   int
	mu      sync.Mutex
	done    int
	started map[string]objects.Ref
}

func (r *run) start(ref objects.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started[ref.Key()] = ref
}

func (r *run) finish(error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done++
}

func (r *run) startedRefs() []objects.Ref {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]objects.Ref, 0, len(r.started))
	for _, ref := range r.started {
		out = append(out, ref)
	}
	return out
}

// halt says whether to stop starting writes, and why: the caller's Stop
// or another writer's inventory write (the fence).
type halt struct {
	stop  context.Context
	fence <-chan error
	mu    sync.Mutex
	why   error
	lost  *inventory.ConflictError
}

func (h *halt) halted() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.why == nil && h.stop != nil && h.stop.Err() != nil {
		h.why = context.Cause(h.stop)
	}
	if h.why == nil {
		select {
		case err := <-h.fence:
			h.why = err
			errors.As(err, &h.lost)
		default:
		}
	}
	return h.why
}

func (h *halt) conflict() *inventory.ConflictError {
	h.halted()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// parallel runs fn on the changes, at most limit at once, starting none
// once h halts; it waits for those started.
func parallel(changes []plan.Change, limit int, h *halt, fn func(plan.Change) error) error {
	sem := make(chan struct{}, limit)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, c := range changes {
		sem <- struct{}{}
		if h.halted() != nil {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(c); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
