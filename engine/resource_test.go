package engine_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// Each Terraform resource instance has its own stack: the name is a valid
// label value, stable, and different for different instances, long names
// included.
func TestResourceStackName(t *testing.T) {
	long := strings.Repeat("n", 63)
	names := map[string]any{
		"tf-workload-a-b.c":  &spec.Workload{Namespace: "a-b", Name: "c"},
		"tf-workload-a.b-c":  &spec.Workload{Namespace: "a", Name: "b-c"},
		"tf-package-v100":    &spec.Package{Name: "v100"},
		"tf-quota-team-a":    &spec.Quota{Namespace: "team-a"},
		"tf-platform-system": &spec.Platform{Namespace: "system"},
	}
	for want, r := range names {
		if got := engine.ResourceStackName(r); got != want {
			t.Errorf("ResourceStackName(%+v) = %q, want %q", r, got, want)
		}
	}
	a := engine.ResourceStackName(&spec.Workload{Namespace: long, Name: strings.Repeat("x", 45)})
	b := engine.ResourceStackName(&spec.Workload{Namespace: long, Name: strings.Repeat("y", 45)})
	for _, n := range []string{a, b} {
		if errs := validation.IsValidLabelValue(n); len(errs) > 0 {
			t.Errorf("%q is not a label value: %v", n, errs)
		}
	}
	if a == b || a != engine.ResourceStackName(&spec.Workload{Namespace: long, Name: strings.Repeat("x", 45)}) {
		t.Errorf("long names must stay distinct and stable: %q, %q", a, b)
	}
}
