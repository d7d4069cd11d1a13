package render_test

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

const a100 = "NVIDIA A100-SXM4-40GB"

func migPackageStack() *spec.Stack {
	s := &spec.Stack{Name: "t",
		Packages: []*spec.Package{{Meta: spec.Meta{Address: "gpuslice_package.mig"}, Name: "a100-1g", GPUModel: a100, MIGProfile: "1g.5gb"}},
		Quotas:   []*spec.Quota{{Meta: spec.Meta{Address: "gpuslice_quota.a"}, Namespace: "team-a", Slices: map[string]int64{"a100-1g": 3}}},
		Workloads: []*spec.Workload{{Meta: spec.Meta{Address: "gpuslice_workload.w"}, Namespace: "team-a", Name: "w", Package: "a100-1g",
			Kind: spec.KindDeployment, Replicas: 2, Container: spec.Container{Image: "ollama/ollama:0.24.0"}, WaitFor: spec.WaitReady, Timeout: "1m"}},
	}
	s.Resolve(tables.BuiltinGPUModels())
	return s
}

func objectOf[T any](t *testing.T, s *spec.Stack, kind string) *T {
	t.Helper()
	objs, err := render.Stack(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.MustUnstructured().GetKind() == kind {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.MustUnstructured().Object, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}

// A MIG package's DeviceClass pins the driver, its model, MIG devices and
// its profile (attributes read with has(), so a partition is a mismatch,
// not an error), and reads back as the same package.
func TestMIGDeviceClass(t *testing.T) {
	s := migPackageStack()
	dc := objectOf[resourcev1.DeviceClass](t, s, "DeviceClass")
	if dc.Annotations[contract.AnnotationSharing] != contract.SharingMIG || dc.Annotations[contract.AnnotationMIGProfile] != "1g.5gb" ||
		dc.Annotations[contract.AnnotationMemory] != "4864Mi" || dc.Labels[render.LabelFraction] != "" {
		t.Errorf("DeviceClass metadata: %v %v", dc.Labels, dc.Annotations)
	}
	// which devices it matches the real scheduler shows (engine's
	// TestMIGOnTheScheduler); here, what it pins
	want := `device.driver == "gpuslice.dev" && device.attributes["gpuslice.dev"].model == "NVIDIA A100-SXM4-40GB" && ` +
		`has(device.attributes["gpuslice.dev"].sharing) && device.attributes["gpuslice.dev"].sharing == "mig" && ` +
		`has(device.attributes["gpuslice.dev"].migProfile) && device.attributes["gpuslice.dev"].migProfile == "1g.5gb"`
	if got := dc.Spec.Selectors[0].CEL.Expression; len(dc.Spec.Selectors) != 1 || got != want {
		t.Errorf("selector:\n got %s\nwant %s", got, want)
	}
	back, err := render.PackageOf(dc)
	if err != nil || back.Kind() != contract.SharingMIG || back.MIGProfile != "1g.5gb" || back.GPUModel != a100 || back.MemoryBytes != 4864<<20 {
		t.Errorf("read back %+v, %v", back, err)
	}
	delete(dc.Annotations, contract.AnnotationMIGProfile)
	if _, err := render.PackageOf(dc); err == nil {
		t.Error("a MIG class without its profile read back")
	}
}

// A MIG workload's claim template asks for one device of the class with
// no capacity, and the quota counts the class's devices like any
// package's.
func TestMIGClaimTemplateAndQuota(t *testing.T) {
	s := migPackageStack()
	rct := objectOf[resourcev1.ResourceClaimTemplate](t, s, "ResourceClaimTemplate")
	r := rct.Spec.Spec.Devices.Requests
	if len(r) != 1 || r[0].Exactly == nil || r[0].Exactly.DeviceClassName != "a100-1g" || r[0].Exactly.Count != 1 || r[0].Exactly.Capacity != nil {
		t.Errorf("claim template requests %+v", r)
	}
	if rct.Name != "w-a100-1g" {
		t.Errorf("claim template name %s", rct.Name)
	}
	type quota struct {
		Spec struct {
			Hard map[string]string `json:"hard"`
		} `json:"spec"`
	}
	q := objectOf[quota](t, s, "ResourceQuota")
	if got := q.Spec.Hard["a100-1g.deviceclass.resource.k8s.io/devices"]; got != "3" {
		t.Errorf("quota hard = %v", q.Spec.Hard)
	}
}
