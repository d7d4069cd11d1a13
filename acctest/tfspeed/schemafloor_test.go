package tfspeed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gpuslice/gpuslice/provider"
)

// The schema floor: the same no-change plan with a provider that serves
// gpuslice's schema and does nothing else (./schemafloor). OpenTofu's own
// work grows with the schema it walks, encodes and stores, not only with
// the number of resources, so the `terraform_data` floor says what
// OpenTofu costs for as many resources, and this floor what it costs for
// these resources: the plan less this floor is the provider's own share.

// buildSchemaFloor builds ./schemafloor as the provider is built, into a
// filesystem mirror of its own under dir, and returns the CLI
// configuration that installs it.
func buildSchemaFloor(b *testing.B, dir string) string {
	b.Helper()
	mirror := filepath.Join(dir, "schema-floor-mirror")
	bin := filepath.Join(mirror, provider.Address, "0.0.1", runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-gpuslice_v0.0.1")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./schemafloor")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the schema floor: %v\n%s", err, out)
	}
	tfrc := filepath.Join(dir, "schema-floor.tfrc")
	cfg := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [%q]\n  }\n  direct {\n    exclude = [%q]\n  }\n}\n",
		mirror, provider.Address, provider.Address)
	if err := os.WriteFile(tfrc, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	return tfrc
}

// schemaFloorStack copies the configuration and state of the stack in
// from, as the real provider applied it, into a directory of its own that
// plans with the schema floor, and initialises it.
func schemaFloorStack(b *testing.B, t tools, from string) (dir string, env []string) {
	b.Helper()
	dir = filepath.Join(b.TempDir(), "schema-floor")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"main.tf", "terraform.tfstate"} {
		data, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	env = append(t.tofuEnv(), "TF_CLI_CONFIG_FILE="+t.schemaFloorTfrc)
	run(b, dir, env, []int{0}, t.tofu, "init", "-input=false", "-no-color")
	return dir, env
}
