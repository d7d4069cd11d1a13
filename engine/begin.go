package engine

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// Begin starts the run of a plan of stack before the configuration is
// loaded: the stack's last inventory is read, and with it the kinds and
// namespaces it names and the API server's schemas of those kinds (which
// the plan compares with), while the caller parses and evaluates the
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
			e.view.WarmTypes(groupVersions(rec.Refs)...)
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

// groupVersions are the group-versions of the kinds refs name, each once.
func groupVersions(refs []objects.Ref) []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, ref := range refs {
		if k, err := objects.KindOf(ref.Group, ref.Kind); err == nil && !slices.Contains(out, k.GVR.GroupVersion()) {
			out = append(out, k.GVR.GroupVersion())
		}
	}
	return out
}
