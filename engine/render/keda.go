package render

import (
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// KEDA's ScaledObject, which is no client-go type: written as the
// unstructured object KEDA's CRD documents.
const (
	KEDAAPIVersion = "keda.sh/v1alpha1"
	KEDAKind       = "ScaledObject"
)

// scaledObject renders the workload's KEDA ScaledObject. KEDA creates and
// drives an HPA of its own from it.
func (r renderer) scaledObject(w *spec.Workload, apiVersion, kind string) objects.Object {
	as, k := w.Autoscaling, w.Autoscaling.KEDA
	var triggers []any
	if p := k.Prometheus; p != nil {
		md := map[string]any{"serverAddress": p.ServerAddress, "query": p.Query, "threshold": p.Threshold}
		if p.ActivationThreshold != "" {
			md["activationThreshold"] = p.ActivationThreshold
		}
		triggers = append(triggers, map[string]any{"type": "prometheus", "metadata": md})
	}
	for _, t := range []struct {
		name string
		pct  *int32
	}{{"cpu", as.CPUUtilization}, {"memory", as.MemoryUtilization}} {
		if t.pct != nil {
			triggers = append(triggers, map[string]any{"type": t.name, "metricType": "Utilization",
				"metadata": map[string]any{"value": strconv.Itoa(int(*t.pct))}})
		}
	}
	so := map[string]any{
		"scaleTargetRef":  map[string]any{"apiVersion": apiVersion, "kind": kind, "name": w.Name},
		"minReplicaCount": int64(as.MinReplicas),
		"maxReplicaCount": int64(as.MaxReplicas),
		"triggers":        triggers,
	}
	if k.PollingInterval != nil {
		so["pollingInterval"] = int64(*k.PollingInterval)
	}
	if k.CooldownPeriod != nil {
		so["cooldownPeriod"] = int64(*k.CooldownPeriod)
	}
	meta := r.meta(w.Address, w.Namespace, AutoscalerName(w), map[string]string{"app.kubernetes.io/name": w.Name, objects.LabelWorkload: w.Name})
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": KEDAAPIVersion, "kind": KEDAKind, "metadata": unstructuredMeta(meta), "spec": so,
	}}
	return objects.FromUnstructured(w.Address, u)
}
