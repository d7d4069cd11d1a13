package engine

import (
	"context"

	"github.com/gpuslice/gpuslice/engine/capacity"
	"github.com/gpuslice/gpuslice/engine/maintenance"
)

// GPUs lists every GPU the node plugins publish, by node and index: what
// they publish, not what is allocated, so no claim is read.
func (e *Engine) GPUs(ctx context.Context) ([]capacity.GPU, error) {
	snap, err := capacity.Published(ctx, e.view)
	if err != nil {
		return nil, err
	}
	return snap.GPUs(), nil
}

// Capacity counts the slices of every package applied to the cluster,
// published, allocated and free, by package name.
func (e *Engine) Capacity(ctx context.Context) ([]capacity.Package, error) {
	snap, err := capacity.Load(ctx, e.view)
	if err != nil {
		return nil, err
	}
	return snap.Packages(ctx, e.view)
}

// GPUStates lists every GPU the node plugins publish with its health, the
// taints on its devices (its node plugin's and DeviceTaintRules') and the
// claims still allocated on it, as `gpuslice gpu list` reads them.
func (e *Engine) GPUStates(ctx context.Context) ([]maintenance.GPUState, error) {
	return maintenance.List(ctx, e.Clients.Typed)
}
