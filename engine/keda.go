package engine

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/render"
)

// kedaInstalled asks the API server whether KEDA's ScaledObject CRD is
// served; nil when discovery cannot tell.
func (e *Engine) kedaInstalled(ctx context.Context) *bool {
	list, err := e.Clients.Typed.Discovery().ServerResourcesForGroupVersion(render.KEDAAPIVersion)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return new(bool)
		}
		return nil
	}
	found := false
	for _, r := range list.APIResources {
		if r.Kind == render.KEDAKind {
			found = true
		}
	}
	return &found
}

// withoutUninstalledKinds leaves out ScaledObjects where KEDA is not
// installed: there is nothing to plan them against, and the plan-time
// check refuses the workload naming its keda block.
func (e *Engine) withoutUninstalledKinds(ctx context.Context, objs []objects.Object) []objects.Object {
	var scaled bool
	for _, o := range objs {
		if o.Obj.GetKind() == render.KEDAKind {
			scaled = true
		}
	}
	if !scaled {
		return objs
	}
	if ok := e.kedaInstalled(ctx); ok == nil || *ok {
		return objs
	}
	out := make([]objects.Object, 0, len(objs))
	for _, o := range objs {
		if o.Obj.GetKind() != render.KEDAKind {
			out = append(out, o)
		}
	}
	return out
}
