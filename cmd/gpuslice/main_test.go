package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/proc/proctest"
)

var gpusliceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpuslice-cli-")
	if err != nil {
		panic(err)
	}
	gpusliceBin = filepath.Join(dir, "gpuslice")
	if out, err := exec.Command("go", "build", "-o", gpusliceBin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := clustertest.Main(m, cluster.Options{}, nil)
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs the built CLI and returns its combined output and exit code.
func run(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(gpusliceBin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

const cliConfig = `
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}
variable "slices" {
  type    = number
  default = 1
}
resource "gpuslice_package" "small" {
  name      = "cli-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}
resource "gpuslice_quota" "q" {
  namespace = "cli"
  slices    = { (gpuslice_package.small.name) = var.slices }
}
`

func TestValidateNeedsNoCluster(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cliConfig), 0o644)
	out, code := run(t, []string{"KUBECONFIG=/nonexistent"}, "validate", dir)
	if code != 0 || !strings.Contains(out, "Success! The configuration is valid: stack") {
		t.Fatalf("validate: exit %d\n%s", code, out)
	}
	os.WriteFile(filepath.Join(dir, "main.tf"), []byte(strings.Replace(cliConfig, "fraction  = 25", "fraction  = 30", 1)), 0o644)
	out, code = run(t, nil, "validate", dir)
	if code != 1 || !strings.Contains(out, "main.tf:14:15: gpuslice_package.small.fraction: Fraction not offered") {
		t.Fatalf("invalid config: exit %d\n%s", code, out)
	}
}

// The plan-time checks that need no cluster run in validate, with the
// error on the attribute in the file, and a table file of the user's own
// teaches them a model.
func TestValidateRunsTheChecks(t *testing.T) {
	dir := t.TempDir()
	workload := cliConfig + `
resource "gpuslice_workload" "llm" {
  namespace      = gpuslice_quota.q.namespace
  name           = "llm"
  package        = gpuslice_package.small.name
  preload_models = ["our-model:3b"]
  expose { port = 11434 }
  container {
    image          = "ollama/ollama:0.24.0"
    env            = { OLLAMA_CONTEXT_LENGTH = "131072" }
    memory_request = "2Gi"
    memory_limit   = "4Gi"
  }
  model_volume {
    size       = "20Gi"
    mount_path = "/root/.ollama"
  }
}
`
	os.WriteFile(filepath.Join(dir, "main.tf"), []byte(workload), 0o644)
	out, code := run(t, nil, "validate", dir)
	if code != 0 || !strings.Contains(out, `main.tf:25:21: gpuslice_workload.llm.preload_models[0]: Model not known: "our-model:3b" has no row in the model table`) {
		t.Fatalf("unknown model: exit %d\n%s", code, out)
	}
	table := filepath.Join(t.TempDir(), "ours.yaml")
	os.WriteFile(table, []byte("version: 1\nllms:\n  - {name: \"our-model:3b\", weights_mib: 2000, layers: 28, kv_heads: 8, head_dim: 128}\n"), 0o644)
	out, code = run(t, nil, "validate", dir, "-table", table)
	if code != 1 || !strings.Contains(out, `main.tf:29:24: gpuslice_workload.llm.container.env["OLLAMA_CONTEXT_LENGTH"]: Model does not fit the slice: our-model:3b needs about 16.4 GiB`) {
		t.Fatalf("context too long: exit %d\n%s", code, out)
	}
}

func TestPlanApplyStatusAgainstACluster(t *testing.T) {
	c := clustertest.Shared(t)
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cliConfig), 0o644)

	out, code := run(t, env, "plan", dir, "-stack", "cli", "-detailed-exitcode")
	if code != 2 || !strings.Contains(out, "+   DeviceClass cli-8gi will be created") || !strings.Contains(out, "Plan: 3 to add") {
		t.Fatalf("plan before apply: exit %d, want 2\n%s", code, out)
	}
	// Without a terminal, apply refuses to go on unasked.
	out, code = run(t, env, "apply", dir, "-stack", "cli")
	if code != 1 || !strings.Contains(out, "rerun with -auto-approve") {
		t.Fatalf("apply without approval: exit %d\n%s", code, out)
	}
	out, code = run(t, env, "apply", dir, "-stack", "cli", "-auto-approve")
	if code != 0 || !strings.Contains(out, "Apply complete") {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	out, code = run(t, env, "plan", dir, "-stack", "cli", "-detailed-exitcode")
	if code != 0 || !strings.Contains(out, "No changes.") {
		t.Fatalf("plan after apply: exit %d, want 0\n%s", code, out)
	}

	// -var changes the plan; -json describes it for machines.
	out, code = run(t, env, "plan", dir, "-stack", "cli", "-var", "slices=3", "-json", "-detailed-exitcode")
	if code != 2 {
		t.Fatalf("plan -json: exit %d\n%s", code, out)
	}
	var doc struct {
		FormatVersion string `json:"format_version"`
		Changes       []struct {
			Action string `json:"action"`
			Object struct{ Kind, Name string }
			Fields []struct {
				Path          string
				Before, After any
			}
		}
		Summary map[string]int
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("plan -json is not JSON: %v\n%s", err, out)
	}
	if doc.FormatVersion != "1" || len(doc.Changes) != 1 || doc.Changes[0].Action != "update" || doc.Changes[0].Object.Kind != "ResourceQuota" ||
		len(doc.Changes[0].Fields) != 1 || doc.Changes[0].Fields[0].Path != `.spec.hard["cli-8gi.deviceclass.resource.k8s.io/devices"]` ||
		doc.Changes[0].Fields[0].After != "3" || doc.Summary["update"] != 1 {
		t.Fatalf("plan -json = %+v", doc)
	}

	// An unreachable cluster is a clear error, not a stack trace.
	out, code = run(t, []string{"KUBECONFIG=/nonexistent/kubeconfig"}, "plan", dir, "-stack", "cli")
	if code != 1 || !strings.Contains(out, "gpuslice dev up") || strings.Contains(out, "goroutine") {
		t.Fatalf("plan without a cluster: exit %d\n%s", code, out)
	}

	out, code = run(t, env, "destroy", dir, "-stack", "cli", "-auto-approve")
	if code != 0 || !strings.Contains(out, "Destroy complete") || !strings.Contains(out, "1 released") {
		t.Fatalf("destroy: exit %d\n%s", code, out)
	}
}

// reconcile is the GitOps loop: it applies the directory, reverts an edit
// made behind its back, picks up a change to the files, and stops cleanly on
// SIGTERM.
func TestReconcileCorrectsDrift(t *testing.T) {
	c := clustertest.Shared(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.tf"), []byte(strings.ReplaceAll(cliConfig, "cli", "gitops")), 0o644)
	cmd := exec.Command(gpusliceBin, "reconcile", dir, "-stack", "gitops", "-interval", "500ms")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath)
	var out proctest.Output
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	quotas := c.Client().CoreV1().ResourceQuotas("gitops")
	slices := corev1.ResourceName("gitops-8gi.deviceclass.resource.k8s.io/devices")
	waitHard := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			q, err := quotas.Get(context.Background(), "gpuslice", metav1.GetOptions{})
			if err == nil && q.Spec.Hard.Name(slices, resource.DecimalSI).String() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("quota slices never became %s (%v)\n%s", want, err, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitHard("1")

	// Someone edits the quota by hand: the next round puts it back.
	patch := []byte(`{"spec":{"hard":{"gitops-8gi.deviceclass.resource.k8s.io/devices":"9"}}}`)
	if _, err := quotas.Patch(context.Background(), "gpuslice", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHard("1")
	// The Git sync writes a new version of the files.
	os.WriteFile(filepath.Join(dir, "main.tf"), []byte(strings.Replace(strings.ReplaceAll(cliConfig, "cli", "gitops"), "default = 1", "default = 2", 1)), 0o644)
	waitHard("2")
	// The quota changes mid-round; the round's report comes after its
	// other writes and waits, so wait for the report before stopping.
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(out.String(), "stack gitops: reconciled") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("want 3 reconciled rounds (create, revert, change) within 30 s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("reconcile after SIGTERM: %v\n%s", err, out.String())
	}
	run(t, []string{"KUBECONFIG=" + c.KubeconfigPath}, "destroy", dir, "-stack", "gitops", "-auto-approve")
}
