package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
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
// The examples' names get the tests' prefix (team-a is acc-examples,
// v100-8gi acc-v100-8gi), so nothing of a tester's cluster is in the way.
func TestAccExamplesOffline(t *testing.T) {
	withoutSuitePlatform(t)
	root := repoRoot()
	tfrc := install(t)
	work := filepath.Join(t.TempDir(), "examples")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	resources, _ := filepath.Glob(filepath.Join(root, "examples", "resources", "*", "resource.tf"))
	dataSources, _ := filepath.Glob(filepath.Join(root, "examples", "data-sources", "*", "data-source.tf"))
	files := append(append(resources, dataSources...), filepath.Join(root, "examples", "provider", "provider.tf"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Simulated nodes have no kubelet and the control plane no storage
		// provisioner: pods never start, so apply does not wait for them.
		data = bytes.ReplaceAll(data, []byte(`wait_for  = "ready"`), []byte(`wait_for  = "none"`))
		data = exampleNames.ReplaceAll(data, []byte(`"acc-$1"`))
		data = bytes.ReplaceAll(data, []byte(`"team-a"`), []byte(`"`+examplesNamespace+`"`))
		name := strings.ReplaceAll(strings.TrimPrefix(f, filepath.Join(root, "examples")+"/"), "/", "_")
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	applyOffline(t, work, tfrc, []string{"TF_VAR_kubeconfig=" + kubeconfig}, 7)
}

// exampleNames are the examples' package names.
var exampleNames = regexp.MustCompile(`"((?:v100|a100)-[a-z0-9]+)"`)

const examplesNamespace = "acc-examples"

var (
	installOnce sync.Once
	installDir  string
)

// install runs `make install` into a temporary mirror once and returns its
// CLI configuration file.
func install(t *testing.T) string {
	t.Helper()
	installOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpuslice-mirror-")
		if err != nil {
			t.Fatal(err)
		}
		run(t, repoRoot(), nil, "make", "-s", "install", "MIRROR="+filepath.Join(dir, "mirror"), "TFRC="+filepath.Join(dir, "gpuslice.tfrc"))
		installDir = dir
	})
	if installDir == "" {
		t.Fatal("make install failed in an earlier test")
	}
	return filepath.Join(installDir, "gpuslice.tfrc")
}

// applyOffline runs tofu init (from the mirror alone), apply, a plan that
// must change no resource, and destroy in dir; the workload acc-examples/ollama
// must exist in between.
func applyOffline(t *testing.T, dir, tfrc string, extraEnv []string, resources int) {
	t.Helper()
	env := append([]string{"TF_CLI_CONFIG_FILE=" + tfrc, "TF_IN_AUTOMATION=1",
		// Nothing may be downloaded: a registry lookup would fail here.
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}, extraEnv...)
	tofu := os.Getenv("TF_ACC_TERRAFORM_PATH")
	out := run(t, dir, env, tofu, "init", "-input=false", "-no-color")
	if !strings.Contains(out, "gpuslice/gpuslice v0.1.0") {
		t.Errorf("init did not install the mirrored provider:\n%s", out)
	}
	out = run(t, dir, env, tofu, "apply", "-auto-approve", "-input=false", "-no-color")
	if want := fmt.Sprintf("Apply complete! Resources: %d added", resources); !strings.Contains(out, want) {
		t.Errorf("apply output lacks %q:\n%s", want, out)
	}
	d, err := kube.AppsV1().Deployments(examplesNamespace).Get(context.Background(), "ollama", metav1.GetOptions{})
	if err != nil || d.Spec.Template.Spec.Containers[0].Image != "ollama/ollama:0.24.0" {
		t.Errorf("Deployment %s/ollama after apply: %v", examplesNamespace, err)
	}
	// Outputs may move on (a claim appears); resources must not.
	out = run(t, dir, env, tofu, "plan", "-input=false", "-no-color")
	if strings.Contains(out, " will be ") || strings.Contains(out, " must be ") {
		t.Errorf("plan after apply wants changes:\n%s", out)
	}
	run(t, dir, env, tofu, "destroy", "-auto-approve", "-input=false", "-no-color")
	if _, err := kube.AppsV1().Deployments(examplesNamespace).Get(context.Background(), "ollama", metav1.GetOptions{}); err == nil {
		t.Errorf("Deployment %s/ollama still there after destroy", examplesNamespace)
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// On expiry the whole process group goes, so tofu's provider plugin is
	// not left running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
