package readback

import (
	"context"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// readAutoscaling reads the workload's HorizontalPodAutoscaler back into
// its autoscaling block. The live replica count is then the autoscaler's,
// not the configuration's: replicas stays what prior says (the count the
// workload was created with), so refresh never shows the autoscaler's
// scaling as drift.
func readAutoscaling(ctx context.Context, v *view.View, w *spec.Workload, prior *spec.Workload, autoscaledBy string) error {
	var as *spec.Autoscaling
	var err error
	// Only a controller marked as KEDA's is looked up there: the kind
	// exists only where KEDA is installed.
	if strings.HasPrefix(autoscaledBy, render.KEDAKind+"/") {
		as, err = readScaledObject(ctx, v, w)
	} else {
		as, err = readHPA(ctx, v, w)
	}
	if as == nil || err != nil {
		return err
	}
	w.Autoscaling = as
	if prior != nil && prior.Autoscaling != nil && len(prior.Autoscaling.Metrics) == len(as.Metrics) {
		for i := range as.Metrics {
			keepPriorTargets(&as.Metrics[i], prior.Autoscaling.Metrics[i])
		}
	}
	if prior != nil && prior.Autoscaling != nil {
		w.Replicas = prior.Replicas
	} else {
		w.Replicas = as.MinReplicas // imported: the start the configuration most likely means
	}
	return nil
}

func readHPA(ctx context.Context, v *view.View, w *spec.Workload) (*spec.Autoscaling, error) {
	hpa, err := get[autoscalingv2.HorizontalPodAutoscaler](ctx, v, "autoscaling", "HorizontalPodAutoscaler", w.Namespace, render.AutoscalerName(w))
	if hpa == nil || err != nil {
		return nil, err
	}
	if !managed(hpa.Labels) || hpa.Spec.ScaleTargetRef.Name != w.Name {
		return nil, nil
	}
	as := &spec.Autoscaling{MinReplicas: deref(hpa.Spec.MinReplicas, 1), MaxReplicas: hpa.Spec.MaxReplicas}
	for _, m := range hpa.Spec.Metrics {
		switch m.Type {
		case autoscalingv2.ResourceMetricSourceType:
			if m.Resource == nil || m.Resource.Target.AverageUtilization == nil {
				continue
			}
			pct := *m.Resource.Target.AverageUtilization
			switch m.Resource.Name {
			case "cpu":
				as.CPUUtilization = &pct
			case "memory":
				as.MemoryUtilization = &pct
			}
		case autoscalingv2.PodsMetricSourceType:
			if m.Pods != nil {
				as.Metrics = append(as.Metrics, readMetric(spec.MetricPods, m.Pods.Metric, m.Pods.Target, nil))
			}
		case autoscalingv2.ObjectMetricSourceType:
			if m.Object != nil {
				o := m.Object.DescribedObject
				as.Metrics = append(as.Metrics, readMetric(spec.MetricObject, m.Object.Metric, m.Object.Target,
					&spec.DescribedObject{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name}))
			}
		case autoscalingv2.ExternalMetricSourceType:
			if m.External != nil {
				as.Metrics = append(as.Metrics, readMetric(spec.MetricExternal, m.External.Metric, m.External.Target, nil))
			}
		}
	}
	return as, nil
}

func readMetric(typ string, id autoscalingv2.MetricIdentifier, t autoscalingv2.MetricTarget, o *spec.DescribedObject) spec.Metric {
	m := spec.Metric{Type: typ, Name: id.Name, Object: o}
	if id.Selector != nil && len(id.Selector.MatchLabels) > 0 {
		m.Selector = id.Selector.MatchLabels
	}
	if t.Value != nil {
		m.TargetValue = t.Value.String()
	}
	if t.AverageValue != nil {
		m.TargetAverageValue = t.AverageValue.String()
	}
	return m
}

// keepPriorTargets keeps a target as the configuration writes it ("0.5"
// for "500m") when it is the same amount.
func keepPriorTargets(m *spec.Metric, prior spec.Metric) {
	for _, t := range []struct{ live, prior *string }{{&m.TargetValue, &prior.TargetValue}, {&m.TargetAverageValue, &prior.TargetAverageValue}} {
		if q, err := resource.ParseQuantity(*t.live); err == nil && *t.live != "" {
			*t.live = quantity(q, *t.prior)
		}
	}
}
