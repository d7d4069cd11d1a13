package clustertest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// The CRD tests read the other projects' CRDs from bin/crds/ as `make
// tools` fetched them: with no module proxy (GOPROXY=off) and a go command
// on the PATH that records its calls and fails, each file is read and is
// the CRD of its kind, and go was never run.
func TestCRDsReadWithoutTheNetwork(t *testing.T) {
	if _, err := os.Stat(filepath.Join(cluster.FindBinDir(), "crds")); err != nil {
		testenv.Unavailable(t, "the CRD files are fetched by `make tools` into bin/crds: %v", err)
	}
	fake := t.TempDir()
	ran := filepath.Join(fake, "ran")
	if err := os.WriteFile(filepath.Join(fake, "go"), []byte("#!/bin/sh\necho \"$@\" >>"+ran+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", fake)
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	for _, crd := range append([]CRD{PyTorchJob, ScaledObject, TrainJob, TrainingRuntime}, FluxSources...) {
		skipped := false
		t.Run(crd.Kind, func(t *testing.T) {
			t.Cleanup(func() { skipped = t.Skipped() })
			var obj struct {
				Kind string `json:"kind"`
				Spec struct {
					Group string `json:"group"`
					Names struct {
						Kind string `json:"kind"`
					} `json:"names"`
					Versions []struct {
						Name string `json:"name"`
					} `json:"versions"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(crd.read(t), &obj); err != nil {
				t.Fatal(err)
			}
			var versions []string
			for _, v := range obj.Spec.Versions {
				versions = append(versions, v.Name)
			}
			if obj.Kind != "CustomResourceDefinition" || obj.Spec.Group != crd.Group || obj.Spec.Names.Kind != crd.Kind || !slices.Contains(versions, crd.Version) {
				t.Errorf("%s is a %s of %s %s %v, want the CustomResourceDefinition of %s/%s %s", crd.File, obj.Kind, obj.Spec.Group, obj.Spec.Names.Kind, versions, crd.Group, crd.Version, crd.Kind)
			}
		})
		if skipped {
			t.Errorf("reading the %s CRD was skipped: it must be read from bin/crds, with no network", crd.Kind)
		}
	}
	if calls, err := os.ReadFile(ran); err == nil {
		t.Errorf("reading the CRDs ran go: %s", calls)
	}
}
