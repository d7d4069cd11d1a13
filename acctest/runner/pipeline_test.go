package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// The pipeline's namespace, ServiceAccount and token Secret, as the
// ci-pipelines guide names them.
const (
	pipelineNamespace = "gpuslice-ci"
	pipelineToken     = "pipeline-token"
)

// jobTimeout bounds one pipeline job (a hung job, not a timing target).
const jobTimeout = 5 * time.Minute

// A CI pipeline outside the cluster, as the ci-pipelines guide sets it up:
// an administrator makes the pipeline's identity and applies the platform
// that binds it; then each job runs the guide's script in a fresh checkout
// with only its kubeconfig secret, the committed lock file and
// the provider from the OCI mirror. The plan job's saved plan applies in
// another checkout, the drift job is quiet on an unchanged cluster and
// exits 2 after an edit behind the pipeline's back, which the next plan
// and apply revert, and the pipeline's token reads no Secret outside its
// namespace.
func TestCIPipeline(t *testing.T) {
	env := realnodetest.Shared(t)
	reg := publishRelease(t)
	createManifest(t, env.Cluster.Client(), pipelineSnippet(t, "identity"))
	t.Cleanup(func() {
		_ = env.Cluster.Client().CoreV1().Namespaces().Delete(context.Background(), pipelineNamespace, metav1.DeleteOptions{})
	})
	token, ca := waitForToken(t, env.Cluster.Client())

	repo := pipelineRepo(t, env, strings.ReplaceAll(snippet(t, "cli-config"), "registry.example.com", reg.Addr()), reg.CertPEM)
	// The administrator has a kubeconfig; the pipeline has its secrets.
	admin := repo.env("KUBE_CONFIG_PATH=" + env.Cluster.KubeconfigPath)
	pipeline := repo.env("KUBE_CONFIG_PATH=" + pipelineKubeconfig(t, env.Cluster.Host, token, ca))

	bootstrap := repo.checkout(t)
	mustJob(t, bootstrap, admin, 0, "tofu", "init", "-no-color", "-lockfile=readonly")
	mustJob(t, bootstrap, admin, 0, "tofu", "apply", "-auto-approve", "-no-color", "-target=gpuslice_platform.this")
	t.Cleanup(func() {
		out, code := job(bootstrap, admin, "tofu", "destroy", "-auto-approve", "-no-color")
		if code != 0 {
			t.Errorf("the administrator's destroy: exit %d\n%s", code, out)
		} else if objs := managed(t, env); len(objs) != 0 {
			t.Errorf("left behind after destroy: %v", objs)
		}
	})

	planned := repo.checkout(t)
	out := mustJob(t, planned, pipeline, 0, "sh", "gpuslice-ci.sh", "plan")
	if !strings.Contains(out, "Plan: ") {
		t.Fatalf("the plan job planned nothing:\n%s", out)
	}
	applied := repo.checkout(t)
	copyFile(t, filepath.Join(planned, "gpuslice.tfplan"), filepath.Join(applied, "gpuslice.tfplan"))
	out = mustJob(t, applied, pipeline, 0, "sh", "gpuslice-ci.sh", "apply")
	if !strings.Contains(out, "Apply complete!") {
		t.Fatalf("the apply job applied nothing:\n%s", out)
	}
	out = mustJob(t, repo.checkout(t), pipeline, 0, "sh", "gpuslice-ci.sh", "drift")
	t.Logf("drift on an unchanged cluster:\n%s", tail(out))

	// Someone raises team-a's quota by hand.
	editQuota(t, env.Cluster.Client(), "64")
	out = mustJob(t, repo.checkout(t), pipeline, 2, "sh", "gpuslice-ci.sh", "drift")
	if !strings.Contains(out, "gpuslice_quota.team_a") {
		t.Errorf("the drift job's output does not name the edited quota:\n%s", out)
	}
	t.Logf("drift after the edit:\n%s", tail(out))
	planned = repo.checkout(t)
	mustJob(t, planned, pipeline, 0, "sh", "gpuslice-ci.sh", "plan")
	applied = repo.checkout(t)
	copyFile(t, filepath.Join(planned, "gpuslice.tfplan"), filepath.Join(applied, "gpuslice.tfplan"))
	mustJob(t, applied, pipeline, 0, "sh", "gpuslice-ci.sh", "apply")
	if got := quotaCPU(t, env.Cluster.Client()); got != "8" {
		t.Errorf("after the next plan and apply, team-a's requests.cpu is %s, want the stack's 8", got)
	}
	mustJob(t, repo.checkout(t), pipeline, 0, "sh", "gpuslice-ci.sh", "drift")

	// The pipeline's token is the runner's role and nothing more.
	c, err := kubernetes.NewForConfig(&rest.Config{Host: env.Cluster.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the pipeline's token listing kube-system's Secrets: %v, want forbidden", err)
	}
}

// pipelineFiles are the stack's Git repository as a developer left it
// (dir: main.tf, the guide's script and the lock file their `tofu init`
// wrote) and what the CI system gives every job.
type pipelineFiles struct {
	dir, cliConfig, caFile, home, binDir string
}

func pipelineRepo(t *testing.T, env *realnodetest.Env, cliConfig string, caPEM []byte) *pipelineFiles {
	t.Helper()
	r := &pipelineFiles{dir: t.TempDir(), home: t.TempDir(), binDir: env.BinDir}
	config := t.TempDir()
	r.cliConfig, r.caFile = filepath.Join(config, "tofurc"), filepath.Join(config, "ca.crt")
	for path, data := range map[string]string{
		r.cliConfig:                            cliConfig,
		r.caFile:                               string(caPEM),
		filepath.Join(r.dir, "main.tf"):        stack(pipelineSnippet(t, "backend"), pipelineSnippet(t, "platform"), ""),
		filepath.Join(r.dir, "gpuslice-ci.sh"): pipelineSnippet(t, "script"),
	} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The developer's init needs no cluster: it only writes the lock file.
	mustJob(t, r.dir, r.env(), 0, "tofu", "init", "-no-color", "-backend=false")
	return r
}

// env is a job's whole environment: the CLI configuration, the
// registry's CA and the given credentials; nothing inherited, so no
// kubeconfig unless the credentials name one.
func (r *pipelineFiles) env(credentials ...string) []string {
	return append([]string{"PATH=" + r.binDir + ":/usr/bin:/bin", "HOME=" + r.home, "TF_CLI_CONFIG_FILE=" + r.cliConfig, "SSL_CERT_FILE=" + r.caFile}, credentials...)
}

// checkout is a fresh clone: the committed files, no .terraform.
func (r *pipelineFiles) checkout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"main.tf", "gpuslice-ci.sh", ".terraform.lock.hcl"} {
		copyFile(t, filepath.Join(r.dir, name), filepath.Join(dir, name))
	}
	return dir
}

// job runs one command of a pipeline job in dir with exactly env.
func job(dir string, env []string, name string, args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// Looked up in the job's PATH, not the test's.
	for _, e := range env {
		if path, ok := strings.CutPrefix(e, "PATH="); ok {
			for _, d := range filepath.SplitList(path) {
				if _, err := os.Stat(filepath.Join(d, name)); err == nil {
					cmd.Path, cmd.Err = filepath.Join(d, name), nil
					break
				}
			}
		}
	}
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit) && ctx.Err() == nil:
		return out.String(), exit.ExitCode()
	default:
		return out.String() + "\n" + err.Error(), -1
	}
}

func mustJob(t *testing.T, dir string, env []string, want int, name string, args ...string) string {
	t.Helper()
	out, code := job(dir, env, name, args...)
	if code != want {
		t.Fatalf("%s %s: exit %d, want %d\n%s", name, strings.Join(args, " "), code, want, out)
	}
	return out
}

// createManifest creates the guide's YAML objects as an administrator.
func createManifest(t *testing.T, c kubernetes.Interface, manifest string) {
	t.Helper()
	ctx := context.Background()
	for _, doc := range strings.Split(manifest, "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("the guide's identity manifest: %v\n%s", err, doc)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = c.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = c.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("the guide's identity manifest has a %T the test does not create", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitForToken waits for the token controller to fill the guide's token
// Secret, and returns its token (decoded) and CA.
func waitForToken(t *testing.T, c kubernetes.Interface) (string, []byte) {
	t.Helper()
	var s *corev1.Secret
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		s, err = c.CoreV1().Secrets(pipelineNamespace).Get(ctx, pipelineToken, metav1.GetOptions{})
		return err == nil && len(s.Data["token"]) > 0 && len(s.Data["ca.crt"]) > 0, nil
	})
	if err != nil {
		t.Fatalf("the token controller did not fill %s/%s: %v", pipelineNamespace, pipelineToken, err)
	}
	return string(s.Data["token"]), s.Data["ca.crt"]
}

// pipelineKubeconfig is the guide's kubeconfig, filled in as it says:
// the token Secret's ca.crt as stored (base64) and its token decoded.
func pipelineKubeconfig(t *testing.T, host, token string, caPEM []byte) string {
	t.Helper()
	config := strings.NewReplacer("https://API-SERVER:6443", host, "CA-DATA", base64.StdEncoding.EncodeToString(caPEM), "TOKEN", token).
		Replace(pipelineSnippet(t, "kubeconfig"))
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// teamAQuota is the ResourceQuota gpuslice_quota.team_a renders.
func teamAQuota(t *testing.T, c kubernetes.Interface) *corev1.ResourceQuota {
	t.Helper()
	list, err := c.CoreV1().ResourceQuotas("team-a").List(context.Background(), metav1.ListOptions{LabelSelector: contract.LabelManagedBy + "=" + contract.ManagedBy})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("team-a's gpuslice quota: %v (%d found)", err, len(list.Items))
	}
	return &list.Items[0]
}

func quotaCPU(t *testing.T, c kubernetes.Interface) string {
	q := teamAQuota(t, c).Spec.Hard[corev1.ResourceRequestsCPU]
	return q.String()
}

// editQuota changes requests.cpu as `kubectl edit` does.
func editQuota(t *testing.T, c kubernetes.Interface, cpu string) {
	t.Helper()
	q := teamAQuota(t, c)
	q.Spec.Hard[corev1.ResourceRequestsCPU] = resource.MustParse(cpu)
	if _, err := c.CoreV1().ResourceQuotas(q.Namespace).Update(context.Background(), q, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tail is a job's last lines, for the log.
func tail(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > 12 {
		lines = lines[len(lines)-12:]
	}
	return strings.Join(lines, "\n")
}
