package render_test

import (
	"testing"

	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// One device per pod keeps the claim template name stacks applied before
// gpus_per_pod existed; another count is another (immutable) template.
func TestClaimTemplateNameCarriesTheCount(t *testing.T) {
	w := &spec.Workload{Name: "ollama", Package: "v100-8gi"}
	for n, want := range map[int32]string{0: "ollama-v100-8gi", 1: "ollama-v100-8gi", 4: "ollama-v100-8gi-x4"} {
		w.GPUsPerPod = n
		if got := render.ClaimTemplateName(w, nil); got != want {
			t.Errorf("gpus_per_pod %d: %q, want %q", n, got, want)
		}
	}
}
