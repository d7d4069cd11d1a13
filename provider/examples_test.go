package provider_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// repoRoot is the repository's top directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// The documented examples (examples/provider, every resources/*/resource.tf
// and data-sources/*/data-source.tf), together a quickstart, applied with
// the real provider binary that `make install` puts in a filesystem mirror:
// `tofu init` works with no registry, apply creates what the examples
// declare, a second plan finds nothing to change, destroy removes it.
func TestAccExamplesOffline(t *testing.T) {
	needCluster(t)
	if own {
		t.Skip("applies the examples' fixed names (team-a, v100-8gi)")
	}
	root := repoRoot()
	tmp := t.TempDir()
	mirror, tfrc := filepath.Join(tmp, "mirror"), filepath.Join(tmp, "gpuslice.tfrc")
	run(t, root, nil, "make", "-s", "install", "MIRROR="+mirror, "TFRC="+tfrc)

	work := filepath.Join(tmp, "quickstart")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "examples", "*", "*", "*.tf"))
	files = append(files, filepath.Join(root, "examples", "provider", "provider.tf"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Simulated nodes have no kubelet and the control plane no storage
		// provisioner: pods never start, so apply does not wait for them.
		data = bytes.ReplaceAll(data, []byte(`wait_for  = "ready"`), []byte(`wait_for  = "none"`))
		name := strings.ReplaceAll(strings.TrimPrefix(f, filepath.Join(root, "examples")+"/"), "/", "_")
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"TF_CLI_CONFIG_FILE=" + tfrc, "TF_IN_AUTOMATION=1", "TF_VAR_kubeconfig=" + kubeconfig,
		// Nothing may be downloaded: a registry lookup would fail here.
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}
	tofu := os.Getenv("TF_ACC_TERRAFORM_PATH")
	out := run(t, work, env, tofu, "init", "-input=false", "-no-color")
	if !strings.Contains(out, "gpuslice/gpuslice v0.1.0") {
		t.Errorf("init did not install the mirrored provider:\n%s", out)
	}
	out = run(t, work, env, tofu, "apply", "-auto-approve", "-input=false", "-no-color")
	if !strings.Contains(out, "Apply complete! Resources: 4 added") {
		t.Errorf("apply output:\n%s", out)
	}
	d, err := kube.AppsV1().Deployments("team-a").Get(context.Background(), "ollama", metav1.GetOptions{})
	if err != nil || d.Spec.Template.Spec.Containers[0].Image != "ollama/ollama:0.24.0" {
		t.Errorf("Deployment team-a/ollama after apply: %v", err)
	}
	run(t, work, env, tofu, "plan", "-detailed-exitcode", "-input=false", "-no-color") // exit 2 would mean changes
	run(t, work, env, tofu, "destroy", "-auto-approve", "-input=false", "-no-color")
	if _, err := kube.AppsV1().Deployments("team-a").Get(context.Background(), "ollama", metav1.GetOptions{}); err == nil {
		t.Error("Deployment team-a/ollama still there after destroy")
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
