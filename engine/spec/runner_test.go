package spec_test

import (
	"testing"

	"github.com/gpuslice/gpuslice/engine/diag"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// The runner block names an existing namespace and ServiceAccount: what
// is not a Kubernetes name is refused at plan, naming the attribute.
func TestRunnerNames(t *testing.T) {
	models := tables.BuiltinGPUModels()
	for _, c := range []struct {
		ns, sa, refused string
	}{
		{"flux-system", "tf-runner", ""},
		{"Flux_System", "tf-runner", "runner.namespace"},
		{"ci", "atlantis.bot", ""},
		{"ci", "", "runner.service_account"},
	} {
		s := &spec.Stack{Platform: &spec.Platform{Namespace: "gpuslice-system", TenantLabel: "gpuslice.dev/tenant", Fractions: []int{100},
			Runner: &spec.Runner{Namespace: c.ns, ServiceAccount: c.sa}}}
		s.Platform.Address = "gpuslice_platform.main"
		var refused string
		for _, d := range spec.Validate(s, models) {
			if d.Severity == diag.Error {
				refused = d.Attribute
			}
		}
		if refused != c.refused {
			t.Errorf("runner %q/%q: refused %q, want %q", c.ns, c.sa, refused, c.refused)
		}
	}
}
