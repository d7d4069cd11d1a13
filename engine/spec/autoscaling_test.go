package spec_test

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// Each mistake in an autoscaling block is refused with the attribute it is
// on and what to write instead.
func TestAutoscalingValidation(t *testing.T) {
	models := tables.BuiltinGPUModels()
	pods := spec.Metric{Type: spec.MetricPods, Name: "queue_latency", TargetAverageValue: "2"}
	for _, tc := range []struct {
		name string
		edit func(w *spec.Workload)
		want string // "" means valid
	}{
		{"cpu", func(w *spec.Workload) {}, ""},
		{"metric only", func(w *spec.Workload) {
			w.Autoscaling.CPUUtilization = nil
			w.Autoscaling.Metrics = []spec.Metric{pods}
		}, ""},
		{"statefulset", func(w *spec.Workload) { w.Kind = spec.KindStatefulSet }, ""},
		{"job", func(w *spec.Workload) { w.Kind = spec.KindJob }, `autoscaling: Autoscaling a job: a job runs to completion`},
		{"min 0", func(w *spec.Workload) { w.Autoscaling.MinReplicas = 0 }, `autoscaling.min_replicas: Invalid min_replicas`},
		{"max below min", func(w *spec.Workload) { w.Autoscaling.MinReplicas = 3 }, `autoscaling.max_replicas: Invalid max_replicas: 2 is below min_replicas (3)`},
		{"replicas above max", func(w *spec.Workload) { w.Replicas = 5 }, `replicas: Replicas above max_replicas`},
		{"no target", func(w *spec.Workload) { w.Autoscaling.CPUUtilization = nil }, `autoscaling: Autoscaling without a target`},
		{"no cpu request", func(w *spec.Workload) { w.Container.CPURequest = "" }, `autoscaling.cpu_utilization: Utilization without a request: the autoscaler measures utilization as a percentage of container.cpu_request`},
		{"bad type", func(w *spec.Workload) {
			w.Autoscaling.Metrics = []spec.Metric{{Type: "Resource", Name: "x", TargetValue: "1"}}
		}, `autoscaling.metric[0].type: Invalid metric type`},
		{"pods value", func(w *spec.Workload) {
			w.Autoscaling.Metrics = []spec.Metric{{Type: spec.MetricPods, Name: "x", TargetValue: "1"}}
		}, `autoscaling.metric[0].target_value: Pods metric with a value target`},
		{"no target value", func(w *spec.Workload) { w.Autoscaling.Metrics = []spec.Metric{{Type: spec.MetricExternal, Name: "x"}} }, `autoscaling.metric[0].target_average_value: Missing target`},
		{"bad quantity", func(w *spec.Workload) {
			w.Autoscaling.Metrics = []spec.Metric{{Type: spec.MetricExternal, Name: "x", TargetValue: "lots"}}
		}, `autoscaling.metric[0].target_value: Invalid quantity`},
		{"object without object", func(w *spec.Workload) {
			w.Autoscaling.Metrics = []spec.Metric{{Type: spec.MetricObject, Name: "rps", TargetValue: "100"}}
		}, `autoscaling.metric[0].described_object: Missing described object`},
		{"keda", func(w *spec.Workload) { w.Autoscaling.KEDA = keda() }, ""},
		{"keda with an HPA metric", func(w *spec.Workload) { w.Autoscaling.KEDA = keda(); w.Autoscaling.Metrics = []spec.Metric{pods} },
			`autoscaling.metric: HPA metric with KEDA`},
		{"keda without prometheus", func(w *spec.Workload) { w.Autoscaling.KEDA = &spec.KEDA{} }, `autoscaling.keda.prometheus: Missing trigger`},
		{"keda address", func(w *spec.Workload) {
			w.Autoscaling.KEDA = keda()
			w.Autoscaling.KEDA.Prometheus.ServerAddress = "prometheus:9090"
		},
			`autoscaling.keda.prometheus.server_address: Invalid Prometheus address`},
		{"keda threshold", func(w *spec.Workload) { w.Autoscaling.KEDA = keda(); w.Autoscaling.KEDA.Prometheus.Threshold = "high" },
			`autoscaling.keda.prometheus.threshold: Invalid threshold`},
		{"shared volume", func(w *spec.Workload) {
			w.ModelVolume = &spec.ModelVolume{Size: "1Gi", MountPath: "/m", AccessMode: "ReadWriteOnce"}
		}, `model_volume.access_mode: Volume cannot be shared: up to 2 replicas (autoscaling.max_replicas)`},
	} {
		w := &spec.Workload{Meta: spec.Meta{Address: "gpuslice_workload.w"}, Namespace: "team-a", Name: "w", Package: "p", Kind: spec.KindDeployment, Replicas: 1, GPUsPerPod: 1, Workers: 1,
			WaitFor: spec.WaitReady, Timeout: "10m",
			Container:   spec.Container{Image: "ollama/ollama:0.24.0", CPURequest: "1"},
			Autoscaling: &spec.Autoscaling{MinReplicas: 1, MaxReplicas: 2, CPUUtilization: ptr.To[int32](70)}}
		tc.edit(w)
		s := &spec.Stack{Name: "t", Packages: []*spec.Package{{Meta: spec.Meta{Address: "gpuslice_package.p"}, Name: "p", GPUModel: "Tesla V100-PCIE-32GB", Fraction: 25}},
			Workloads: []*spec.Workload{w}}
		s.Resolve(models)
		diags := spec.Validate(s, models)
		switch {
		case tc.want == "" && diags.HasErrors():
			t.Errorf("%s: unexpected %v", tc.name, diags.Err())
		case tc.want != "" && (!diags.HasErrors() || !strings.Contains(diags.Err().Error(), "gpuslice_workload.w."+tc.want)):
			t.Errorf("%s: want %q, got %v", tc.name, tc.want, diags.Err())
		}
	}
}

// With autoscaling, replicas is only the start, raised to min_replicas.
func TestInitialReplicas(t *testing.T) {
	w := &spec.Workload{Replicas: 1, Autoscaling: &spec.Autoscaling{MinReplicas: 2, MaxReplicas: 5}}
	if got := w.InitialReplicas(); got != 2 {
		t.Errorf("initial replicas = %d, want min_replicas 2", got)
	}
	w.Replicas = 4
	if got := w.InitialReplicas(); got != 4 {
		t.Errorf("initial replicas = %d, want 4", got)
	}
}

func keda() *spec.KEDA {
	return &spec.KEDA{Prometheus: &spec.KEDAPrometheus{ServerAddress: "http://prometheus.monitoring.svc:9090", Query: "sum(queue_latency_seconds)", Threshold: "0.5"}}
}
