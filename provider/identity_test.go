package provider_test

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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A package deleted outside OpenTofu, from a state without resource
// identities (written before the provider had them, or by a client that
// keeps none): every plan, whichever way the provider serves the read,
// plans its re-creation instead of failing with "Missing Resource
// Identity After Read", and apply re-creates it. The real provider binary
// (`make install`) and bin/tofu, as a user runs them.
func TestAccDeletedOutOfBandFromAStateWithoutIdentity(t *testing.T) {
	needCluster(t)
	const name = "acc-oob-8gi"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(packageConfig(name, 25, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"TF_CLI_CONFIG_FILE=" + install(t), "TF_IN_AUTOMATION=1", "HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}
	tofu := os.Getenv("TF_ACC_TERRAFORM_PATH")
	run(t, dir, env, tofu, "init", "-input=false", "-no-color")
	t.Cleanup(func() { run(t, dir, env, tofu, "destroy", "-auto-approve", "-input=false", "-no-color") })
	run(t, dir, env, tofu, "apply", "-auto-approve", "-input=false", "-no-color")

	ctx := context.Background()
	if err := kube.ResourceV1().DeviceClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete DeviceClass %s out of band: %v", name, err)
	}
	stripIdentities(t, filepath.Join(dir, "terraform.tfstate"))

	for _, mode := range []string{"on", "off", "check"} {
		out, code := tofuExit(t, dir, append(env, "GPUSLICE_PROVIDER_FAST_PATH="+mode), tofu, "plan", "-detailed-exitcode", "-input=false", "-no-color")
		if code != 2 || !strings.Contains(out, "gpuslice_package.p will be created") {
			t.Errorf("fast path %s: plan -detailed-exitcode exited %d, want 2 with gpuslice_package.p to be created:\n%s", mode, code, out)
		}
	}
	run(t, dir, env, tofu, "apply", "-auto-approve", "-input=false", "-no-color")
	if _, err := kube.ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("DeviceClass %s after apply: %v", name, err)
	}
}

// stripIdentities removes every resource instance's identity from the
// state file at path, as a state written before identities reads; it fails
// the test when there was none to remove.
func stripIdentities(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	stripped := 0
	resources, _ := state["resources"].([]any)
	for _, r := range resources {
		instances, _ := r.(map[string]any)["instances"].([]any)
		for _, i := range instances {
			inst := i.(map[string]any)
			if _, ok := inst["identity"]; ok {
				stripped++
			}
			delete(inst, "identity")
			delete(inst, "identity_schema_version")
		}
	}
	if stripped == 0 {
		t.Fatalf("%s has no identity to remove:\n%s", path, data)
	}
	state["serial"] = state["serial"].(float64) + 1
	out, err := json.MarshalIndent(state, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tofuExit runs tofu in dir and returns its combined output and exit code
// (run fails the test on any code but 0).
func tofuExit(t *testing.T, dir string, env []string, tofu string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tofu, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", tofu, strings.Join(args, " "), err)
	}
	return string(out), 0
}
