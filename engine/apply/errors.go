package apply

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuslice/gpuslice/engine/plan"
)

// StalePlanError: the cluster changed between plan and apply, so the plan
// no longer says what applying would do. Nothing was changed.
type StalePlanError struct {
	Stack       string
	Differences []string
	// Replan is true when a fresh plan was allowed but cannot be applied
	// either (it has errors, listed among the differences).
	Replan bool
}

func (e *StalePlanError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the plan of stack %q is stale: the cluster changed since it was made (another writer, or a hand):%s\n", e.Stack, list(e.Differences))
	b.WriteString("Nothing was changed. ")
	if e.Replan {
		b.WriteString("Planning again found errors: fix them, then apply.")
	} else {
		b.WriteString("Run apply again to plan against the cluster as it is now and review that plan, or pass -replan to apply a fresh plan without stopping.")
	}
	return b.String()
}

// ConflictError: another writer applied the stack — it wrote the stack's
// inventory after this apply read it. Either nothing was changed
// (Started false), or this apply stopped at once, let its writes in flight
// finish and changed nothing more.
type ConflictError struct {
	Stack string
	// By is the other writer, when the inventory names it.
	By          plan.Writer
	Started     bool
	Done, Total int
	// Differences are what the other writer changed, when known.
	Differences []string
}

func (e *ConflictError) Error() string {
	by := "another writer"
	if e.By.Who != "" {
		by = fmt.Sprintf("another writer, %s at %s,", e.By.Who, e.By.At.Local().Format(time.RFC3339))
	}
	if !e.Started {
		return fmt.Sprintf("conflict: %s applied stack %q after this plan was made (the stack's inventory changed); nothing was changed. "+
			"Run apply again to plan against what the cluster holds now (-replan does that without stopping). The state lock (on unless -lock=false) keeps two writers from meeting like this.%s",
			by, e.Stack, list(e.Differences))
	}
	return fmt.Sprintf("conflict: %s applied stack %q while this apply ran; this apply stopped after %d of %d changes and changed nothing more "+
		"(what it wrote is in the stack's inventory). The cluster may mix both configurations now: run plan, then apply the configuration you want. "+
		"The state lock (on unless -lock=false) keeps two writers from meeting like this.", by, e.Stack, e.Done, e.Total)
}

// InterruptedError: the apply was stopped (Options.Stop) and stopped
// cleanly: no write was cut off half-way, and the inventory records what
// was done.
type InterruptedError struct {
	Stack       string
	Done, Total int
	Cause       error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("apply of stack %q stopped (%v) after %d of %d changes: the writes in flight finished and the stack's inventory records what was applied. "+
		"Run plan to see what is left, and apply to finish.", e.Stack, e.Cause, e.Done, e.Total)
}

func (e *InterruptedError) Unwrap() error { return e.Cause }

// list writes up to ten differences, one a line.
func list(ds []string) string {
	var b strings.Builder
	for i, d := range ds {
		if i == 10 {
			fmt.Fprintf(&b, "\n  … and %d more", len(ds)-10)
			break
		}
		fmt.Fprintf(&b, "\n  - %s", d)
	}
	return b.String()
}
