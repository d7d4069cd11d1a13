package readback

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// readScaledObject reads a workload's KEDA ScaledObject back into its
// autoscaling block; nil when there is none of gpuslice's.
func readScaledObject(ctx context.Context, v *view.View, w *spec.Workload) (*spec.Autoscaling, error) {
	so, err := get[unstructured.Unstructured](ctx, v, "keda.sh", render.KEDAKind, w.Namespace, render.AutoscalerName(w))
	if so == nil || err != nil {
		return nil, err
	}
	if !managed(so.GetLabels()) {
		return nil, nil
	}
	o := so.Object
	if target, _, _ := unstructured.NestedString(o, "spec", "scaleTargetRef", "name"); target != w.Name {
		return nil, nil
	}
	k := &spec.KEDA{PollingInterval: int32Field(o, "pollingInterval"), CooldownPeriod: int32Field(o, "cooldownPeriod")}
	as := &spec.Autoscaling{MinReplicas: 1, KEDA: k}
	if n := int32Field(o, "minReplicaCount"); n != nil {
		as.MinReplicas = *n
	}
	if n := int32Field(o, "maxReplicaCount"); n != nil {
		as.MaxReplicas = *n
	}
	triggers, _, _ := unstructured.NestedSlice(o, "spec", "triggers")
	for _, t := range triggers {
		tm, ok := t.(map[string]any)
		if !ok {
			continue
		}
		md, _ := tm["metadata"].(map[string]any)
		str := func(key string) string { s, _ := md[key].(string); return s }
		switch tm["type"] {
		case "prometheus":
			k.Prometheus = &spec.KEDAPrometheus{ServerAddress: str("serverAddress"), Query: str("query"), Threshold: str("threshold"),
				ActivationThreshold: str("activationThreshold")}
		case "cpu", "memory":
			n, err := strconv.Atoi(str("value"))
			if err != nil {
				continue
			}
			pct := int32(n)
			if tm["type"] == "cpu" {
				as.CPUUtilization = &pct
			} else {
				as.MemoryUtilization = &pct
			}
		}
	}
	return as, nil
}

// int32Field reads spec.<name>, a number; nil when unset.
func int32Field(o map[string]any, name string) *int32 {
	n, found, err := unstructured.NestedInt64(o, "spec", name)
	if !found || err != nil {
		return nil
	}
	v := int32(n)
	return &v
}
