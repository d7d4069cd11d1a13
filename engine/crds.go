package engine

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/render"
)

// optionalKinds are the kinds gpuslice renders only where another
// project's CRD is installed: KEDA's ScaledObject, the Kubeflow Training
// Operator's PyTorchJob and Kubeflow Trainer's TrainJob and
// TrainingRuntime. The plan-time checks refuse a workload that needs a
// missing one, naming its attribute.
var optionalKinds = []struct{ apiVersion, kind string }{
	{render.KEDAAPIVersion, render.KEDAKind},
	{render.PyTorchJobAPIVersion, render.PyTorchJobKind},
	{render.TrainerAPIVersion, render.TrainJobKind},
	{render.TrainerAPIVersion, render.TrainingRuntimeKind},
}

// served asks the API server whether it serves kind in apiVersion (its
// CRD is installed); nil when discovery cannot tell.
func (e *Engine) served(apiVersion, kind string) *bool {
	list, err := e.Clients.Typed.Discovery().ServerResourcesForGroupVersion(apiVersion)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return new(bool)
		}
		return nil
	}
	found := false
	for _, r := range list.APIResources {
		if r.Kind == kind {
			found = true
		}
	}
	return &found
}

// servedAll is served for several kinds of one apiVersion: false when
// any is missing.
func (e *Engine) servedAll(apiVersion string, kinds ...string) *bool {
	for _, k := range kinds {
		if ok := e.served(apiVersion, k); ok == nil || !*ok {
			return ok
		}
	}
	return new(true)
}

// withoutUninstalledKinds leaves out the objects of optional kinds the
// cluster does not serve: there is nothing to plan them against, and the
// plan-time checks refuse the workload naming the attribute that asks for
// them.
func (e *Engine) withoutUninstalledKinds(_ context.Context, objs []objects.Object) []objects.Object {
	for _, k := range optionalKinds {
		rendered := false
		for _, o := range objs {
			if o.GroupVersionKind().Kind == k.kind {
				rendered = true
			}
		}
		if !rendered {
			continue
		}
		if ok := e.served(k.apiVersion, k.kind); ok != nil && !*ok {
			kept := make([]objects.Object, 0, len(objs))
			for _, o := range objs {
				if o.GroupVersionKind().Kind != k.kind {
					kept = append(kept, o)
				}
			}
			objs = kept
		}
	}
	return objs
}
