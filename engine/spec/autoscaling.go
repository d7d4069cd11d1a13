package spec

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Autoscaling is the workload's autoscaling block: a HorizontalPodAutoscaler
// that owns the replica count between MinReplicas and MaxReplicas.
type Autoscaling struct {
	MinReplicas int32 `json:"min_replicas"`
	MaxReplicas int32 `json:"max_replicas"`
	// CPUUtilization and MemoryUtilization are target average utilizations
	// in percent of the container's requests; nil when not a target.
	CPUUtilization    *int32   `json:"cpu_utilization"`
	MemoryUtilization *int32   `json:"memory_utilization"`
	Metrics           []Metric `json:"metric"`
	// KEDA, when set, renders a KEDA ScaledObject instead of an HPA.
	KEDA *KEDA `json:"keda"`
}

// KEDA is the autoscaling block's keda block.
type KEDA struct {
	PollingInterval *int32          `json:"polling_interval"`
	CooldownPeriod  *int32          `json:"cooldown_period"`
	Prometheus      *KEDAPrometheus `json:"prometheus"`
}

// KEDAPrometheus is KEDA's prometheus trigger.
type KEDAPrometheus struct {
	ServerAddress       string `json:"server_address"`
	Query               string `json:"query"`
	Threshold           string `json:"threshold"`
	ActivationThreshold string `json:"activation_threshold"`
}

// Metric is one custom or external metric of the autoscaling block, as a
// Prometheus adapter or KEDA's metrics server serves it.
type Metric struct {
	Type               string            `json:"type"`
	Name               string            `json:"name"`
	Selector           map[string]string `json:"selector"`
	TargetValue        string            `json:"target_value"`
	TargetAverageValue string            `json:"target_average_value"`
	Object             *DescribedObject  `json:"described_object"`
}

// DescribedObject is the Kubernetes object an Object metric describes.
type DescribedObject struct {
	APIVersion string `json:"api_version"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// Metric types, as autoscaling/v2 names them.
const (
	MetricPods     = "Pods"
	MetricObject   = "Object"
	MetricExternal = "External"
)

// Autoscaled reports whether an autoscaler owns the workload's replica
// count.
func (w *Workload) Autoscaled() bool { return w.Autoscaling != nil }

// UsesKEDA reports whether a workload of the stack scales with KEDA.
func (s *Stack) UsesKEDA() bool {
	for _, w := range s.Workloads {
		if w.Autoscaling != nil && w.Autoscaling.KEDA != nil {
			return true
		}
	}
	return false
}

// InitialReplicas is the replica count a workload is created with. With
// autoscaling, replicas is only that start, raised to min_replicas; the
// autoscaler owns the count afterwards.
func (w *Workload) InitialReplicas() int32 {
	if w.Autoscaling == nil {
		return w.Replicas
	}
	return min(max(w.Replicas, w.Autoscaling.MinReplicas), w.Autoscaling.MaxReplicas)
}

func (v *validator) autoscaling(w *Workload) {
	as := w.Autoscaling
	if as == nil {
		return
	}
	a := w.Address
	if w.Kind == KindJob {
		v.errorf(a, "autoscaling", "Autoscaling a job", "a job runs to completion and cannot be scaled by an autoscaler: remove the autoscaling block or use kind = \"deployment\" or \"statefulset\"")
		return
	}
	if as.MinReplicas < 1 {
		v.errorf(a, "autoscaling.min_replicas", "Invalid min_replicas", "%d: use 1 or more (a HorizontalPodAutoscaler does not scale to zero)", as.MinReplicas)
	}
	if as.MaxReplicas < max(as.MinReplicas, 1) {
		v.errorf(a, "autoscaling.max_replicas", "Invalid max_replicas", "%d is below min_replicas (%d): set max_replicas to at least min_replicas", as.MaxReplicas, as.MinReplicas)
	}
	if w.Replicas > as.MaxReplicas && as.MaxReplicas >= 1 {
		v.errorf(a, "replicas", "Replicas above max_replicas", "replicas = %d but autoscaling.max_replicas = %d: with autoscaling, replicas is only the count the workload starts with (raised to min_replicas); lower it or leave it unset", w.Replicas, as.MaxReplicas)
	}
	if as.CPUUtilization == nil && as.MemoryUtilization == nil && len(as.Metrics) == 0 && as.KEDA == nil {
		v.errorf(a, "autoscaling", "Autoscaling without a target", "set cpu_utilization, memory_utilization, a metric block or a keda block: the autoscaler needs something to scale on")
	}
	v.utilization(a, "cpu_utilization", as.CPUUtilization, "container.cpu_request", w.Container.CPURequest)
	v.utilization(a, "memory_utilization", as.MemoryUtilization, "container.memory_request", w.Container.MemoryRequest)
	for i := range as.Metrics {
		v.metric(a, fmt.Sprintf("autoscaling.metric[%d]", i), &as.Metrics[i])
	}
	v.keda(a, as)
	if mv := w.ModelVolume; mv != nil && w.Kind == KindDeployment && as.MaxReplicas > 1 && mv.AccessMode != "ReadWriteMany" {
		v.errorf(a, "model_volume.access_mode", "Volume cannot be shared", "up to %d replicas (autoscaling.max_replicas) of a deployment share one %s volume, which only one node can mount; use kind = \"statefulset\" (a volume per replica) or access_mode = \"ReadWriteMany\"", as.MaxReplicas, mv.AccessMode)
	}
}

// utilization checks a percentage target; the autoscaler computes it
// against the container's request, so the request must be set.
func (v *validator) utilization(a, attr string, pct *int32, request, value string) {
	if pct == nil {
		return
	}
	if *pct < 1 {
		v.errorf(a, "autoscaling."+attr, "Invalid utilization", "%d: use a percentage of %s above 0, e.g. 70", *pct, request)
	}
	if value == "" {
		v.errorf(a, "autoscaling."+attr, "Utilization without a request", "the autoscaler measures utilization as a percentage of %s, which is not set: set %s or scale on another target", request, request)
	}
}

func (v *validator) metric(a, attr string, m *Metric) {
	switch m.Type {
	case MetricPods, MetricObject, MetricExternal:
	default:
		v.errorf(a, attr+".type", "Invalid metric type", "%q: use \"Pods\" (averaged over the pods), \"Object\" (one object's metric) or \"External\" (from outside the cluster)", m.Type)
	}
	if strings.TrimSpace(m.Name) == "" {
		v.errorf(a, attr+".name", "Missing metric name", "set name to the metric as the metrics adapter serves it, e.g. \"queue_latency_seconds\"")
	}
	for k, val := range m.Selector {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.errorf(a, attr+".selector", "Invalid selector label", "%q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
			v.errorf(a, attr+".selector", "Invalid selector value", "%q = %q: %s", k, val, strings.Join(errs, "; "))
		}
	}
	switch {
	case m.TargetValue != "" && m.TargetAverageValue != "":
		v.errorf(a, attr+".target_value", "Two targets", "set either target_value or target_average_value, not both")
	case m.TargetValue != "":
		if m.Type == MetricPods {
			v.errorf(a, attr+".target_value", "Pods metric with a value target", "a Pods metric is averaged over the pods: set target_average_value instead")
		}
		v.quantity(a, attr+".target_value", m.TargetValue)
	case m.TargetAverageValue != "":
		v.quantity(a, attr+".target_average_value", m.TargetAverageValue)
	default:
		v.errorf(a, attr+".target_average_value", "Missing target", "set target_average_value (the value per pod) or, for Object and External metrics, target_value (the total)")
	}
	if m.Type == MetricObject {
		o := m.Object
		if o == nil || o.Kind == "" || o.Name == "" || o.APIVersion == "" {
			v.errorf(a, attr+".described_object", "Missing described object", "an Object metric belongs to one object: set described_object { api_version, kind, name }, e.g. api_version = \"v1\", kind = \"Service\", name = \"ollama\"")
		}
	} else if m.Object != nil {
		v.errorf(a, attr+".described_object", "Described object on a "+m.Type+" metric", "only an Object metric names an object: remove described_object or set type = \"Object\"")
	}
}

func (v *validator) keda(a string, as *Autoscaling) {
	k := as.KEDA
	if k == nil {
		return
	}
	if len(as.Metrics) > 0 {
		v.errorf(a, "autoscaling.metric", "HPA metric with KEDA", "metric blocks are HorizontalPodAutoscaler metrics; with a keda block, KEDA scales on its prometheus trigger (and cpu_utilization, memory_utilization): move the metric into keda.prometheus as a query, or remove the keda block")
	}
	for _, p := range []struct {
		attr string
		val  *int32
	}{{"polling_interval", k.PollingInterval}, {"cooldown_period", k.CooldownPeriod}} {
		if p.val != nil && *p.val < 1 {
			v.errorf(a, "autoscaling.keda."+p.attr, "Invalid "+p.attr, "%d: use a number of seconds above 0, or leave it unset for KEDA's default", *p.val)
		}
	}
	p := k.Prometheus
	if p == nil {
		v.errorf(a, "autoscaling.keda.prometheus", "Missing trigger", "set a prometheus block { server_address, query, threshold }: KEDA needs something to scale on")
		return
	}
	if u, err := url.Parse(p.ServerAddress); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.errorf(a, "autoscaling.keda.prometheus.server_address", "Invalid Prometheus address", "%q: use an http(s) URL such as \"http://prometheus.monitoring.svc:9090\"", p.ServerAddress)
	}
	if strings.TrimSpace(p.Query) == "" {
		v.errorf(a, "autoscaling.keda.prometheus.query", "Missing query", "set query to a PromQL expression returning one value")
	}
	for _, t := range []struct{ attr, val string }{{"threshold", p.Threshold}, {"activation_threshold", p.ActivationThreshold}} {
		attr, val := t.attr, t.val
		if val == "" && attr == "activation_threshold" {
			continue
		}
		if _, err := strconv.ParseFloat(val, 64); err != nil {
			v.errorf(a, "autoscaling.keda.prometheus."+attr, "Invalid "+attr, "%q is not a number: write the value of the query per replica, e.g. \"0.5\"", val)
		}
	}
}
