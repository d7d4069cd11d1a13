package engine

import (
	"context"

	"github.com/gpuslice/gpuslice/engine/internal/checks"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// GatherFacts lets tests see what the plan-time checks read.
func GatherFacts(ctx context.Context, e *Engine, s *spec.Stack) (*checks.Facts, error) {
	return checks.Gather(ctx, e.view, s)
}
