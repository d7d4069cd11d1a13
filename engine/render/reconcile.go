package render

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/gpuslice/gpuslice/engine/spec"
)

// ReconcileName is the app.kubernetes.io/name of the reconciler's objects
// in the chart.
const ReconcileName = "gpuslice-reconcile"

const nameLabel = "app.kubernetes.io/name"

// ReconcileDeployment names the reconciler's Deployment of stack.
func ReconcileDeployment(stack string) string { return ReconcileName + "-" + stack }

// ReconcileValues are the chart values of a reconcile block.
func ReconcileValues(rc *spec.Reconcile) map[string]any {
	repo, tag, digest := SplitImage(rc.Image)
	return map[string]any{
		"enabled": true, "gitURL": rc.GitURL, "ref": rc.Ref, "path": rc.Path, "stack": rc.Stack, "interval": rc.Interval,
		"image": map[string]any{"repository": repo, "tag": tag, "digest": digest},
	}
}

// ReconcileOf reads a reconcile block back from the Deployment the
// platform rendered.
func ReconcileOf(d *appsv1.Deployment) (*spec.Reconcile, error) {
	cs := d.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return nil, fmt.Errorf("Deployment %s/%s has no container", d.Namespace, d.Name)
	}
	rc := &spec.Reconcile{Image: cs[0].Image}
	for _, a := range cs[0].Args {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--git-url":
			rc.GitURL = value
		case "--git-ref":
			rc.Ref = value
		case "--git-path":
			rc.Path = value
		case "--stack":
			rc.Stack = value
		case "--interval":
			rc.Interval = value
		}
	}
	return rc, nil
}
