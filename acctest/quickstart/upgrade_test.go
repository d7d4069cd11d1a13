package quickstart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/acctest/internal/tofutest"
	"github.com/gpuslice/gpuslice/acctest/previous"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// installPrevious builds the previous release's provider with its own
// `make install` (once: previous.Built caches it) and returns a CLI
// configuration that installs it.
func installPrevious(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := previous.Built(t, filepath.Join(root, "bin"), "provider", func(src, out string) error {
		return previous.Run(src, "make", "-s", "install", "MIRROR="+filepath.Join(out, "mirror"), "TFRC="+filepath.Join(out, "unused.tfrc"))
	})
	rc := filepath.Join(t.TempDir(), "previous.tfrc")
	conf := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"registry.terraform.io/gpuslice/gpuslice\"]\n  }\n  direct {\n    exclude = [\"registry.terraform.io/gpuslice/gpuslice\"]\n  }\n}\n", filepath.Join(dir, "mirror"))
	if err := os.WriteFile(rc, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return rc
}

// upgradeHCL is a configuration the previous release served: fraction
// packages, a quota and a workload on them.
const upgradeHCL = `
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}
provider "gpuslice" {}

resource "gpuslice_package" "quarter" {
  name      = "upgrade-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}
resource "gpuslice_package" "whole" {
  name                   = "upgrade-32gi"
  gpu_model              = "Tesla V100-PCIE-32GB"
  fraction               = 100
  extended_resource_name = "gpuslice.dev/upgrade-32gi"
}
resource "gpuslice_quota" "team" {
  namespace       = "upgrade"
  slices          = { (gpuslice_package.quarter.name) = 2, (gpuslice_package.whole.name) = 1 }
  cpu_requests    = "4"
  memory_requests = "8Gi"
}
resource "gpuslice_workload" "app" {
  namespace = gpuslice_quota.team.namespace
  name      = "app"
  package   = gpuslice_package.quarter.name
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "500m"
    memory_request = "1Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = "8192" }
  }
}
output "memory" {
  value = gpuslice_package.quarter.memory
}
`

// TestUpgradeFromThePreviousRelease: a configuration of fraction packages,
// a quota and a workload applied by the previous release's provider plans
// once the provider is upgraded — from the state that provider wrote, both
// with a refresh and without one — one change only, and says why: the
// quota of a package with an extended resource name now carries
// requests.<name>, that package's grant for pods asking by that name. After
// that apply the plan is empty, and what it read (a package's memory) stays
// the same.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	c := clustertest.Shared(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(upgradeHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	old := tofutest.In(t, dir, tofutest.Env(c, installPrevious(t)))
	if out, code := old("init", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("tofu init with the previous release: exit %d\n%s", code, out)
	}
	if out, code := old("apply", "-auto-approve", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "Apply complete! Resources: 4 added") {
		t.Fatalf("tofu apply with the previous release: exit %d\n%s", code, out)
	}
	t.Cleanup(func() {
		if out, code := old("destroy", "-auto-approve", "-input=false", "-no-color"); code != 0 {
			t.Errorf("destroy: exit %d\n%s", code, out)
		}
	})

	// The upgrade: this provider, built as make install builds it, in
	// place of the previous one. The two share version 0.1.0 (no release
	// was cut since), so the lock file is made afresh as for a new version.
	os.Remove(filepath.Join(dir, ".terraform.lock.hcl"))
	os.RemoveAll(filepath.Join(dir, ".terraform", "providers"))
	current := tofutest.In(t, dir, tofutest.Env(c, tofutest.Install(t)))
	if out, code := current("init", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("tofu init with this provider: exit %d\n%s", code, out)
	}
	const quota, newGrant = "gpuslice_quota.team", `update ResourceQuota upgrade/gpuslice: .spec.hard["requests.gpuslice.dev/upgrade-32gi"]`
	for _, args := range [][]string{{}, {"-refresh=false"}} {
		out, code := current(append([]string{"plan", "-detailed-exitcode", "-input=false", "-no-color", "-out=upgrade.plan"}, args...)...)
		if code != 2 || !strings.Contains(out, newGrant) {
			t.Errorf("plan %v after the upgrade: exit %d, want 2 with the quota's new grant (%s)\n%s", args, code, newGrant, out)
		}
		show, _ := current("show", "-json", "upgrade.plan")
		var plan struct {
			ResourceChanges []struct {
				Address string `json:"address"`
				Change  struct {
					Actions []string `json:"actions"`
				} `json:"change"`
			} `json:"resource_changes"`
		}
		if err := json.Unmarshal([]byte(show), &plan); err != nil {
			t.Fatalf("tofu show -json: %v\n%s", err, show)
		}
		if len(plan.ResourceChanges) != 4 {
			t.Errorf("plan %v covers %d resources, want 4", args, len(plan.ResourceChanges))
		}
		for _, rc := range plan.ResourceChanges {
			want := "no-op"
			if rc.Address == quota {
				want = "update"
			}
			if len(rc.Change.Actions) != 1 || rc.Change.Actions[0] != want {
				t.Errorf("plan %v after the upgrade: %s %v, want %s", args, rc.Address, rc.Change.Actions, want)
			}
		}
	}
	if out, code := current("apply", "-auto-approve", "-input=false", "-no-color"); code != 0 || !strings.Contains(out, "Resources: 0 added, 1 changed, 0 destroyed") {
		t.Fatalf("apply after the upgrade: exit %d\n%s", code, out)
	}
	if out, code := current("plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
		t.Errorf("plan after the upgrade's apply: exit %d, want 0 (no changes)\n%s", code, out)
	}
	if out, _ := current("output", "-raw", "memory"); out != "8Gi" {
		t.Errorf("output memory after the upgrade = %q, want 8Gi", out)
	}
}
