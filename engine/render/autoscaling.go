package render

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// AutoscalerName names a workload's HorizontalPodAutoscaler.
func AutoscalerName(w *spec.Workload) string { return w.Name }

// autoscaledBy is the value of the workload controller's
// AnnotationAutoscaledBy: plan and apply leave spec.replicas to it.
func autoscaledBy(w *spec.Workload) string {
	if w.Autoscaling.KEDA != nil {
		return KEDAKind + "/" + AutoscalerName(w)
	}
	return "HorizontalPodAutoscaler/" + AutoscalerName(w)
}

// autoscaler renders the workload's HorizontalPodAutoscaler (or KEDA
// ScaledObject), or nothing without an autoscaling block.
func (r renderer) autoscaler(w *spec.Workload, apiVersion, kind string) ([]objects.Object, error) {
	as := w.Autoscaling
	if as == nil {
		return nil, nil
	}
	if as.KEDA != nil {
		return []objects.Object{r.scaledObject(w, apiVersion, kind)}, nil
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: r.meta(w.Address, w.Namespace, AutoscalerName(w), map[string]string{"app.kubernetes.io/name": w.Name, objects.LabelWorkload: w.Name}),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: w.Name},
			MinReplicas:    ptr.To(as.MinReplicas),
			MaxReplicas:    as.MaxReplicas,
		},
	}
	for _, t := range []struct {
		name corev1.ResourceName
		pct  *int32
	}{{corev1.ResourceCPU, as.CPUUtilization}, {corev1.ResourceMemory, as.MemoryUtilization}} {
		if t.pct == nil {
			continue
		}
		hpa.Spec.Metrics = append(hpa.Spec.Metrics, autoscalingv2.MetricSpec{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: t.name, Target: autoscalingv2.MetricTarget{
				Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(*t.pct),
			}},
		})
	}
	for _, m := range as.Metrics {
		hpa.Spec.Metrics = append(hpa.Spec.Metrics, metricSpec(m))
	}
	o := object(w.Address, hpa, "autoscaling/v2", "HorizontalPodAutoscaler")
	return []objects.Object{o}, nil
}

func metricSpec(m spec.Metric) autoscalingv2.MetricSpec {
	id := autoscalingv2.MetricIdentifier{Name: m.Name}
	if len(m.Selector) > 0 {
		id.Selector = &metav1.LabelSelector{MatchLabels: m.Selector}
	}
	target := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType}
	if m.TargetValue != "" {
		target = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse(m.TargetValue))} // validated
	} else {
		target.AverageValue = ptr.To(resource.MustParse(m.TargetAverageValue)) // validated
	}
	switch m.Type {
	case spec.MetricPods:
		return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: id, Target: target}}
	case spec.MetricObject:
		o := autoscalingv2.CrossVersionObjectReference{}
		if m.Object != nil {
			o = autoscalingv2.CrossVersionObjectReference{APIVersion: m.Object.APIVersion, Kind: m.Object.Kind, Name: m.Object.Name}
		}
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: o, Metric: id, Target: target}}
	}
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: id, Target: target}}
}
