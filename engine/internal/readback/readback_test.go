package readback_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/internal/readback"
	"github.com/gpuslice/gpuslice/engine/internal/view"
	"github.com/gpuslice/gpuslice/engine/internal/view/viewtest"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// These fixtures set every field of their spec type (checked below), so a
// field added to the spec fails this test until readback reads it back —
// otherwise it would be a perpetual diff in the provider, and missing after
// import.

func fullPlatform() *spec.Platform {
	return &spec.Platform{Meta: spec.Meta{Address: "p"}, Namespace: "gpuslice-system", TenantLabel: "example.com/tenant", Fractions: []int{25, 50, 100}, AdmissionPolicies: true,
		SchedulerUsers: []string{"system:kube-scheduler", "system:serviceaccount:kube-system:second-scheduler"},
		AnySize:        ptr.To(true), TimeSlicing: ptr.To(false), ForceDestroy: true, NodePlugin: &spec.NodePlugin{
			Image: "registry.test/gpuslice/gpuslice-nodeplugin:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5", ImagePullPolicy: "Always",
			NodeSelector: map[string]string{"gpu": "v100"}, DriverRoot: "/run/nvidia/driver", ToolkitConfig: "/etc/nvidia/config.toml", SimulatedGPUs: "v100-32gb:2",
			Env: map[string]string{"HTTPS_PROXY": "http://proxy:3128"}, Tolerations: []spec.Toleration{{Key: "dedicated", Operator: "Equal", Value: "gpu", Effect: "NoExecute"}},
			HealthRecovery: "90s", HealthEvictAfter: "10m",
		}, Reconcile: &spec.Reconcile{GitURL: "https://git.test/platform/stacks.git", Ref: "v1.2", Path: "stacks/prod", Stack: "prod", Interval: "45s",
			Image: "registry.test/gpuslice/gpuslice-reconcile:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"},
		Runner: &spec.Runner{Namespace: "gitops", ServiceAccount: "runner"}}
}

// The package fixtures are one of each kind, which together set every
// field: a kind's fields exclude another's.
func fullPackage() *spec.Package {
	return &spec.Package{Meta: spec.Meta{Address: "k"}, Name: "v100-8gi", GPUModel: "Tesla V100-PCIE-32GB", Fraction: 25,
		ExtendedResourceName: "gpuslice.dev/v100-8gi", MemoryBytes: 8 << 30, Memory: "8Gi", ComputeShare: 25}
}

func anySizePackage() *spec.Package {
	return &spec.Package{Meta: spec.Meta{Address: "a"}, Name: "v100-6gi", GPUModel: "Tesla V100-PCIE-32GB", Memory: "6144Mi", ComputeShare: 20,
		ExtendedResourceName: "gpuslice.dev/v100-6gi", MemoryBytes: 6 << 30}
}

func timeSlicedPackage() *spec.Package {
	return &spec.Package{Meta: spec.Meta{Address: "t"}, Name: "v100-shared", GPUModel: "Tesla V100-PCIE-32GB", Sharing: spec.SharingTimeSliced, Replicas: 4,
		MemoryBytes: 32 << 30, Memory: "32Gi", ComputeShare: 100}
}

func migPackage() *spec.Package {
	return &spec.Package{Meta: spec.Meta{Address: "m"}, Name: "a100-1g", GPUModel: "NVIDIA A100-SXM4-40GB", MIGProfile: "1g.5gb",
		MemoryBytes: 4864 << 20, Memory: "4864Mi", ComputeShare: 14}
}

func fullQuota() *spec.Quota {
	return &spec.Quota{Meta: spec.Meta{Address: "q"}, Namespace: "team-a", Slices: map[string]int64{"v100-8gi": 2, "other": 0},
		CPURequests: "8", MemoryRequests: "16384Mi", CPULimits: "16", MemoryLimits: "32Gi", MaxClaims: ptr.To[int64](4),
		TenantUsers: []string{"alice"}, TenantGroups: []string{"team-a"}}
}

func fullWorkload(kind string) *spec.Workload {
	return &spec.Workload{
		Meta: spec.Meta{Address: "w"}, Namespace: "team-a", Name: "ollama", Package: "v100-8gi", Kind: kind, Replicas: 2,
		GPUsPerPod: 2, Workers: 1, TrainingOperator: spec.TrainingOperatorPyTorchJob,
		Labels: map[string]string{"team": "a"},
		Container: spec.Container{
			Image: "ollama/ollama:0.24.0", ImagePullPolicy: "Always", Command: []string{"ollama"}, Args: []string{"serve"}, Env: map[string]string{"OLLAMA_CONTEXT_LENGTH": "16384"},
			CPURequest: "1", MemoryRequest: "2048Mi", CPULimit: "2", MemoryLimit: "4Gi",
			Ports:          []spec.Port{{ContainerPort: 11434, Name: "api", Protocol: "TCP"}},
			ReadinessProbe: &spec.Probe{HTTPPath: "/api/version", Port: 11434, InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3},
			LivenessProbe:  &spec.Probe{Command: []string{"true"}, InitialDelaySeconds: 1, PeriodSeconds: 20, TimeoutSeconds: 1, FailureThreshold: 5},
		},
		ModelVolume:   &spec.ModelVolume{Size: "20Gi", MountPath: "/root/.ollama", StorageClass: "fast", AccessMode: "ReadWriteOnce", DeleteOnDestroy: true},
		Model:         &spec.Model{Name: "llama3.2:3b", ContextLength: 16384, KVCacheType: "q8_0"},
		Expose:        &spec.Expose{Port: 80, TargetPort: 11434, Type: "NodePort"},
		PreloadModels: []string{"llama3.2:3b", "qwen2.5:0.5b"},
		PreloadImage:  "curlimages/curl:8.11.0",
		WaitFor:       "scheduled",
		Timeout:       "2m",
		Autoscaling: &spec.Autoscaling{MinReplicas: 1, MaxReplicas: 4, CPUUtilization: ptr.To[int32](70), MemoryUtilization: ptr.To[int32](80), Metrics: []spec.Metric{
			{Type: spec.MetricPods, Name: "ts_queue_latency_microseconds", TargetAverageValue: "0.1M"},
			{Type: spec.MetricObject, Name: "requests_per_second", TargetValue: "200", Object: &spec.DescribedObject{APIVersion: "v1", Kind: "Service", Name: "ollama"}},
			{Type: spec.MetricExternal, Name: "queue_messages_ready", Selector: map[string]string{"queue": "inference"}, TargetValue: "500m"},
		},
			// Only one of Metrics (an HPA) and KEDA (a ScaledObject) at a
			// time: the test reads each back in turn.
			KEDA: &spec.KEDA{PollingInterval: ptr.To[int32](15), CooldownPeriod: ptr.To[int32](120), Prometheus: &spec.KEDAPrometheus{
				ServerAddress: "http://prometheus.monitoring.svc:9090", Query: "sum(queue_latency_seconds)", Threshold: "0.5", ActivationThreshold: "0.1"}},
		},
	}
}

// cluster is a view of a fake cluster holding what the stack renders.
func cluster(t *testing.T, s *spec.Stack) *view.View {
	t.Helper()
	objs, err := render.Stack(s)
	if err != nil {
		t.Fatal(err)
	}
	var us []runtime.Object
	for _, o := range objs {
		us = append(us, o.MustUnstructured())
	}
	v, _ := viewtest.New(t, us...)
	return v
}

func TestReadBackEveryField(t *testing.T) {
	ctx := context.Background()
	platform, pkg, quota := fullPlatform(), fullPackage(), fullQuota()
	anySize, timeSliced, mig := anySizePackage(), timeSlicedPackage(), migPackage()
	for _, v := range []any{platform, pkg, quota, fullWorkload(spec.KindDeployment)} {
		if zero := zeroFields(reflect.ValueOf(v).Elem(), ""); len(zero) > 0 && v != any(pkg) {
			t.Fatalf("fixture %T leaves %s unset: set them so readback is tested for them", v, strings.Join(zero, ", "))
		}
	}
	unset := map[string]int{}
	for _, p := range []*spec.Package{pkg, anySize, timeSliced, mig} {
		for _, f := range zeroFields(reflect.ValueOf(p).Elem(), "") {
			unset[f]++
		}
	}
	for f, n := range unset {
		if n == 4 {
			t.Fatalf("no package fixture sets %s: set it in one so readback is tested for it", f)
		}
	}
	c := cluster(t, &spec.Stack{Name: "s", Platform: platform, Packages: []*spec.Package{pkg, anySize, timeSliced, mig}, Quotas: []*spec.Quota{quota}})

	gotPlatform, err := readback.Platform(ctx, c, platform.Namespace, platform)
	check(t, err, gotPlatform, &spec.Platform{Namespace: platform.Namespace, TenantLabel: platform.TenantLabel, Fractions: platform.Fractions, AdmissionPolicies: true,
		SchedulerUsers: platform.SchedulerUsers, AnySize: platform.AnySize, TimeSlicing: platform.TimeSlicing, ForceDestroy: true, NodePlugin: platform.NodePlugin, Reconcile: platform.Reconcile, Runner: platform.Runner})

	// what a configuration holds: a fraction's, a time-sliced and a MIG
	// package's memory and compute share are inferred again
	gotPackage, err := readback.Package(ctx, c, pkg.Name)
	check(t, err, gotPackage, &spec.Package{Name: pkg.Name, GPUModel: pkg.GPUModel, Fraction: pkg.Fraction, ExtendedResourceName: pkg.ExtendedResourceName})
	gotPackage, err = readback.Package(ctx, c, anySize.Name)
	check(t, err, gotPackage, &spec.Package{Name: anySize.Name, GPUModel: anySize.GPUModel, Memory: anySize.Memory, ComputeShare: anySize.ComputeShare,
		ExtendedResourceName: anySize.ExtendedResourceName})
	gotPackage, err = readback.Package(ctx, c, timeSliced.Name)
	check(t, err, gotPackage, &spec.Package{Name: timeSliced.Name, GPUModel: timeSliced.GPUModel, Sharing: timeSliced.Sharing, Replicas: timeSliced.Replicas})
	gotPackage, err = readback.Package(ctx, c, mig.Name)
	check(t, err, gotPackage, &spec.Package{Name: mig.Name, GPUModel: mig.GPUModel, MIGProfile: mig.MIGProfile})

	wantQuota := *quota
	wantQuota.Meta = spec.Meta{}
	gotQuota, err := readback.Quota(ctx, c, quota.Namespace, quota)
	check(t, err, gotQuota, &wantQuota)

	for _, kind := range []string{spec.KindDeployment, spec.KindStatefulSet, spec.KindJob, "training", "pytorchjob", "trainjob"} {
		for _, scaler := range []string{"hpa", "keda"} {
			w := fullWorkload(kind)
			switch kind {
			case "training":
				// A distributed training job: its rendezvous environment is
				// the engine's, not the configuration's.
				w.Kind, w.Replicas, w.Workers, w.TrainingOperator = spec.KindJob, 1, 3, ""
			case "pytorchjob":
				// The same as Kubeflow's PyTorchJob.
				w.Kind, w.Replicas, w.Workers, w.TrainingOperator = spec.KindJob, 1, 3, spec.TrainingOperatorPyTorchJob
			case "trainjob":
				// The same as Kubeflow Trainer's TrainJob.
				w.Kind, w.Replicas, w.Workers, w.TrainingOperator = spec.KindJob, 1, 3, spec.TrainingOperatorTrainJob
			default:
				w.TrainingOperator = "" // only for a training job
			}
			switch {
			case w.Kind == spec.KindJob:
				w.ModelVolume.AccessMode = "ReadWriteMany" // replicas share it
				w.Autoscaling = nil                        // a job is not scaled
			case scaler == "hpa":
				w.Autoscaling.KEDA = nil
			default:
				w.Autoscaling.Metrics = nil
			}
			c := cluster(t, &spec.Stack{Name: "s", Packages: []*spec.Package{pkg}, Workloads: []*spec.Workload{w}})
			got, err := readback.Workload(ctx, c, w.Namespace, w.Name, w)
			want := *w
			want.Meta = spec.Meta{}
			check(t, err, got, &want)
		}
	}
}

func check[T any](t *testing.T, err error, got, want *T) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %T:\n got %s\nwant %s", got, asJSON(got), asJSON(want))
	}
}

// zeroFields lists the fields of v left at their zero value (Meta aside).
func zeroFields(v reflect.Value, prefix string) []string {
	var out []string
	for i := 0; i < v.NumField(); i++ {
		f, name := v.Field(i), prefix+v.Type().Field(i).Name
		if v.Type().Field(i).Name == "Meta" {
			continue
		}
		if f.IsZero() {
			out = append(out, name)
			continue
		}
		if f.Kind() == reflect.Pointer && f.Elem().Kind() == reflect.Struct && f.Type().Elem().Name() != "Probe" {
			out = append(out, zeroFields(f.Elem(), name+".")...)
		}
		if f.Kind() == reflect.Struct {
			out = append(out, zeroFields(f, name+".")...)
		}
	}
	return out
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
