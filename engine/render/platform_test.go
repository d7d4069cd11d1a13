package render_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// The platform's settings read back from the ConfigMap it rendered are the
// settings it was rendered from.
func TestPlatformOfRoundTrip(t *testing.T) {
	want := &spec.Platform{Meta: spec.Meta{Address: "gpuslice_platform.p"}, Namespace: "gs", TenantLabel: "example.com/tenant", Fractions: []int{10, 25, 50, 100},
		SchedulerUsers: []string{"system:kube-scheduler", "system:serviceaccount:kube-system:second-scheduler"},
		Runner:         &spec.Runner{Namespace: "flux-system", ServiceAccount: "tf-runner"}}
	objs, err := render.Stack(&spec.Stack{Name: "s", Platform: want})
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	for _, o := range objs {
		if o.MustUnstructured().GetKind() == "ConfigMap" && o.MustUnstructured().GetName() == render.PlatformConfigMap {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.MustUnstructured().Object, &cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := render.PlatformOf(&cm)
	if err != nil {
		t.Fatal(err)
	}
	got.Address = want.Address
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PlatformOf = %+v, want %+v", got, want)
	}
}

// A fraction that is not a number is an error naming the ConfigMap and the
// value, never dropped; an empty list is no partitions.
func TestPlatformOfBadFraction(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{"fractions": "", "tenantLabel": "gpuslice.dev/tenant", "anySize": "true"}}
	if p, err := render.PlatformOf(cm); err != nil || len(p.Fractions) != 0 || p.AnySize == nil || !*p.AnySize {
		t.Errorf("no fractions, any size: got %+v, %v", p, err)
	}
	for _, fractions := range []string{"25,half,100", "25,,50"} {
		cm := &corev1.ConfigMap{Data: map[string]string{"fractions": fractions, "tenantLabel": "gpuslice.dev/tenant"}}
		cm.Namespace, cm.Name = "gs", render.PlatformConfigMap
		p, err := render.PlatformOf(cm)
		if err == nil {
			t.Errorf("fractions %q: got %+v, want an error", fractions, p)
			continue
		}
		parts := strings.Split(fractions, ",")
		bad := parts[min(1, len(parts)-1)]
		for _, want := range []string{"gs/" + render.PlatformConfigMap, `"` + bad + `"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("fractions %q: error %q does not name %s", fractions, err, want)
			}
		}
	}
}
