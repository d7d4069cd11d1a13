package simulate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

func TestParseMIGSpecs(t *testing.T) {
	for in, want := range map[string]string{
		"v100-32gb:4":                            "v100-32gb:4",
		"a100-40gb:2,mig=1g.5gb*7":               "a100-40gb:2,mig=1g.5gb*7",
		"A100-40GB,mig=3g.20gb,2g.10gb,1g.5gb*1": "a100-40gb:1,mig=3g.20gb,2g.10gb,1g.5gb",
		"h100-80gb:1,mig=3g.40gb*2":              "h100-80gb:1,mig=3g.40gb*2",
	} {
		s, err := simulate.ParseSpec(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if s.String() != want {
			t.Errorf("%s reads back as %s, want %s", in, s, want)
		}
	}
	for in, why := range map[string]string{
		"a100-40gb:1,mig=1g.6gb":         `MIG profile "1g.6gb" does not exist on the NVIDIA A100-SXM4-40GB; its profiles are 1g.10gb, 1g.5gb, 1g.5gb+me,`,
		"a100-40gb:1,mig=1g.5gb*8":       "do not fit on one NVIDIA A100-SXM4-40GB",
		"a100-40gb:1,mig=7g.40gb,1g.5gb": "no placement is left for the 1g.5gb",
		"v100-32gb:1,mig=1g.5gb":         "a Tesla V100-PCIE-32GB has no MIG; MIG needs one of a100-40gb,",
		"a100-40gb:1,1g.5gb":             "only mig=<instance>,... may follow",
		"a100-40gb:1,mig=1g.5gb*x":       "the repeat count after * must be a number from 1 to 8",
	} {
		if _, err := simulate.ParseSpec(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: error %v, want one saying %q", in, err, why)
		}
	}
	if _, err := simulate.ParseNode("v100-32gb:16;a100-40gb:1"); err == nil || !strings.Contains(err.Error(), "17 GPUs on one node; at most 16") {
		t.Errorf("17 GPUs: error %v", err)
	}
}

// The driver's files as a MIG device's container needs them read: the
// caps major in devices, and each instance's minor in mig-minors with the
// numbering of NVIDIA's driver.
func TestProcFiles(t *testing.T) {
	dir := t.TempDir()
	if err := simulate.WriteProcFiles(dir, 2); err != nil {
		t.Fatal(err)
	}
	minors, err := os.ReadFile(filepath.Join(dir, "driver", "nvidia-caps", "mig-minors"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"config 1\n", "gpu0/gi0/access 3\n", "gpu0/gi3/access 30\n", "gpu0/gi3/ci0/access 31\n", "gpu1/gi0/access 138\n", "gpu1/gi14/ci7/access 272\n"} {
		if !strings.Contains(string(minors), line) {
			t.Errorf("mig-minors lacks %q", line)
		}
	}
	devices, err := os.ReadFile(filepath.Join(dir, "devices"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(devices), "\n236 nvidia-caps\n") {
		t.Errorf("devices lacks the nvidia-caps major:\n%s", devices)
	}
}
