package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine/internal/checks"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// GatherFacts lets tests see what the plan-time checks read.
func GatherFacts(ctx context.Context, e *Engine, s *spec.Stack) (*checks.Facts, error) {
	return checks.Gather(ctx, e.view, s)
}

// Live is what plan compares an object with: the view's copy of it.
func Live(ctx context.Context, e *Engine, ref objects.Ref) (*unstructured.Unstructured, error) {
	return e.view.Live(ctx, ref)
}
