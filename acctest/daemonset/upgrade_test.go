package daemonset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/gpuslice/gpuslice/acctest/previous"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/shim"
)

// The previous release's node plugin runs two workloads, each holding half
// of its 8 GiB slice. The platform's node_plugin.image moves to the current
// release and back, applied with the gpuslice CLI; through both rollouts
// the first workload's container runs on, a new process in it still sees
// its slice with what it holds counted and is refused past it, and each
// plugin reads the other's checkpoint (the current one writes v1, which
// the previous one reads, while every claim is one partition). Each
// release unprepares claims the other prepared.
func TestNodePluginUpgradeAndRollback(t *testing.T) {
	env := realnodetest.Shared(t)
	previous := pushPreviousNodePlugin(t, env, "0.1.0-"+previous.Commit[:7])
	current := env.PushNodePlugin(t, "0.1.0")
	s := newStack(t, env, "ds-upgrade")

	s.apply(config{image: previous, jobs: []job{{name: "steady"}, {name: "early"}}})
	steady, early := s.workload("steady"), s.workload("early")
	s.waitPlugins(previousPlugin, previous, steady, early)
	s.requireLimited(steady, early)

	// Upgrade: the running claims restored by the current plugin.
	s.apply(config{image: current, jobs: []job{{name: "steady"}, {name: "early"}}})
	s.waitPlugins(currentPlugin, current, steady, early)
	s.requireLimited(steady, early)
	// It unprepares a claim the previous release prepared, and prepares one.
	s.apply(config{image: current, jobs: []job{{name: "steady"}, {name: "late"}}})
	s.waitUnprepared(early)
	late := s.workload("late")
	s.waitPlugins(currentPlugin, current, steady, late)
	s.requireLimited(steady, late)

	// Rollback: the previous plugin reads the current one's checkpoint.
	s.apply(config{image: previous, jobs: []job{{name: "steady"}, {name: "late"}}})
	s.waitPlugins(previousPlugin, previous, steady, late)
	s.requireLimited(steady, late)
	// It unprepares the claim the current release prepared, and the first.
	s.apply(config{image: previous})
	s.waitUnprepared(steady, late)
	s.waitPlugins(previousPlugin, previous)
}

// A claim on a share of an any-size device needs checkpoint format v3.
// A newer plugin's format (v99 here) on the node: the current plugin,
// restarted by the DaemonSet, rebuilds its checkpoint from the API server,
// says so in an Event and a metric, keeps the file, and keeps serving the
// claim. The platform refuses to roll the plugin back to the previous
// release, which cannot read v3; forced past it, that release, which has
// no such rebuild, refuses the v3 file and stops without touching it, so
// rolling forward again recovers.
func TestRollbackOverNewerCheckpoint(t *testing.T) {
	env := realnodetest.Shared(t)
	previous := pushPreviousNodePlugin(t, env, "0.1.0-"+previous.Commit[:7])
	current := env.PushNodePlugin(t, "0.1.0")
	s := newStack(t, env, "ds-newer")
	ctx := context.Background()
	client := env.Cluster.Client()

	s.apply(config{image: current, anySize: true})
	s.waitPlugins(currentPlugin, current)
	withShare := config{image: current, anySize: true, jobs: []job{{name: "shared", share: true}}}
	s.apply(withShare)
	shared := s.workload("shared")
	s.waitPlugins(currentPlugin, current, shared)
	s.requireLimited(shared)

	// What a newer release would have left: the same claim in a format
	// this one does not know.
	node := shared.node
	file := filepath.Join(node.StateDir(), checkpoint.Name)
	newer := s.rewriteCheckpoint(node, func(data []byte) []byte {
		return bytes.Replace(data, []byte(`"version":"v3"`), []byte(`"version":"v99"`), 1)
	})
	old := s.pluginPod(node)
	if err := client.CoreV1().Pods(s.platform).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	realnodetest.Eventually(t, 3*time.Minute, "a new plugin pod on "+node.Name, func() (bool, string) {
		p := s.readyPluginPod(node, current)
		return p != nil && p.UID != old.UID, fmt.Sprintf("pod %v", p)
	})
	s.waitPlugins(currentPlugin, current, shared)
	if kept, err := os.ReadFile(file + ".unknown-format"); err != nil || !bytes.Equal(kept, newer) {
		t.Errorf("the newer checkpoint was not kept beside the rebuilt one: %v\n%s", err, kept)
	}
	if got := metric(t, node, `gpuslice_checkpoint_rebuilds_total{reason="unknown-format"}`); got != "1" {
		t.Errorf(`gpuslice_checkpoint_rebuilds_total{reason="unknown-format"} = %s, want 1`, got)
	}
	s.requireEvent(node, driver.EventReasonCheckpointRebuilt, "unknown-format", "1 prepared claims")
	s.requireLimited(shared)

	// Rollback to the previous release, any_size left out (it has no such
	// flag): the platform refuses it at plan time, naming the claim and its
	// node, and the DaemonSet keeps the current image.
	v3, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := client.ResourceV1().ResourceClaims(s.tenant).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var claimRef string
	for _, c := range claims.Items {
		if string(c.UID) == shared.claim {
			claimRef = c.Namespace + "/" + c.Name
		}
	}
	err = s.cli("apply", config{image: previous, jobs: withShare.jobs})
	for _, want := range []string{"gpuslice_platform.this.node_plugin.image", claimRef + " (any-size, on node " + node.Name + ")", "checkpoint format v3", "Delete those workloads"} {
		if claimRef == "" || err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("the rollback to the previous release while claim %s (%s) holds a share: %v; want a refusal saying %q", claimRef, shared.claim, err, want)
		}
	}
	ds, err := client.AppsV1().DaemonSets(s.platform).Get(ctx, "gpuslice-nodeplugin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ds.Spec.Template.Spec.Containers[0].Image; got != current {
		t.Fatalf("after the refused rollback the plugin's image is %s, want %s", got, current)
	}
	s.requireLimited(shared)

	// Forced past gpuslice (the DaemonSet's image set by hand), the
	// previous release cannot read format v3 and stops, leaving the file
	// as it is.
	plugin := &ds.Spec.Template.Spec.Containers[0]
	plugin.Image = previous
	plugin.Args = slices.DeleteFunc(plugin.Args, func(a string) bool { return strings.HasPrefix(a, "--any-size") }) // the previous release has no such flag
	if _, err := client.AppsV1().DaemonSets(s.platform).Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var logs string
	realnodetest.Eventually(t, 3*time.Minute, "the previous release's plugin on "+node.Name+" refusing the v3 checkpoint", func() (bool, string) {
		p := s.pluginPodRunning(node, previous)
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return false, fmt.Sprintf("pod %v", p)
		}
		c := p.Status.ContainerStatuses[0]
		if c.State.Terminated == nil && c.LastTerminationState.Terminated == nil {
			return false, c.String()
		}
		logs = s.containerLogs(p, c.State.Terminated == nil)
		return strings.Contains(logs, "checkpoint format not supported"), c.String() + "\n" + logs
	})
	t.Logf("the previous release on a v3 checkpoint: %s", lastLine(logs))
	if now, err := os.ReadFile(file); err != nil || !bytes.Equal(now, v3) {
		t.Errorf("the previous release changed the checkpoint it could not read: %v\n%s", err, now)
	}
	s.requireLimited(shared)

	// Forward again: the current release restores the claim and unprepares it.
	s.apply(withShare)
	s.waitPlugins(currentPlugin, current, shared)
	s.requireLimited(shared)
	s.apply(config{image: current, anySize: true})
	s.waitUnprepared(shared)
	s.waitPlugins(currentPlugin, current)
}

// release is what a node plugin release writes: the checkpoint format it
// saves for the claims it holds.
type release func(claims []*workload) string

// The previous release wrote v2 whatever it held.
func previousPlugin([]*workload) string { return "v2" }

// The current one writes the oldest format that holds its claims: v1
// while each is one partition, v3 once one is a share of a device.
func currentPlugin(claims []*workload) string {
	for _, w := range claims {
		if w.share {
			return "v3"
		}
	}
	return "v1"
}

// stack is a gpuslice stack applied with the gpuslice CLI, as users apply
// one: a platform installing the node plugin in its own namespace, a
// fraction and an any-size package, a tenant's quota and its jobs.
type stack struct {
	t        *testing.T
	env      *realnodetest.Env
	name     string
	dir      string
	platform string // the platform namespace, where the plugin runs
	tenant   string
	last     config
}

type config struct {
	image   string
	anySize bool // the platform's any_size; left out when false
	jobs    []job
	// forceDestroy lets the clean-up remove the plugin while pods hold slices.
	forceDestroy bool
}

// job is a slice-check job holding half its slice until deleted.
type job struct {
	name  string
	share bool // on the any-size package (6 GiB), not the 8 GiB fraction
}

func (j job) totalMiB() int {
	if j.share {
		return 6144
	}
	return 8192
}

func (j job) holdMiB() int { return j.totalMiB() / 2 }

// workload is a running job's pod, where it runs and its claim.
type workload struct {
	job
	pod       *corev1.Pod
	node      *realnode.Node
	claim     string // UID
	container string // ID
}

func newStack(t *testing.T, env *realnodetest.Env, name string) *stack {
	dir := t.TempDir()
	s := &stack{t: t, env: env, name: name, dir: dir, platform: name + "-system", tenant: name + "-team"}
	t.Cleanup(s.destroy)
	return s
}

func (s *stack) hcl(c config) string {
	port := s.env.Cluster.Host[strings.LastIndex(s.env.Cluster.Host, ":")+1:]
	var b strings.Builder
	fmt.Fprintf(&b, `
resource "gpuslice_platform" "this" {
  namespace     = %q
  force_destroy = %t
`, s.platform, c.forceDestroy)
	if c.anySize {
		b.WriteString("  any_size      = true\n")
	}
	fmt.Fprintf(&b, `  node_plugin {
    image          = %q
    simulated_gpus = "v100-32gb:1"
    driver_root    = %q
    env            = { KUBERNETES_SERVICE_HOST = "127.0.0.1", KUBERNETES_SERVICE_PORT = %q }
  }
}

resource "gpuslice_package" "slice" {
  name      = "%[4]s-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_package" "share" {
  name          = "%[4]s-6gi"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "6Gi"
  compute_share = 20
}

resource "gpuslice_quota" "team" {
  namespace       = %[5]q
  slices          = { (gpuslice_package.slice.name) = 4, (gpuslice_package.share.name) = 2 }
  cpu_requests    = "2"
  memory_requests = "2Gi"
}
`, c.image, realnode.DriverRoot, port, s.name, s.tenant)
	for _, j := range c.jobs {
		pkg := "slice"
		if j.share {
			pkg = "share"
		}
		fmt.Fprintf(&b, `
resource "gpuslice_workload" %[1]q {
  namespace = gpuslice_quota.team.namespace
  name      = %[1]q
  package   = gpuslice_package.%[2]s.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = %[3]q
    command        = ["slice-check", "--hold", "%[4]d"]
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`, j.name, pkg, images.SliceCheck, j.holdMiB())
	}
	return b.String()
}

// apply writes c as the stack's configuration and applies it.
func (s *stack) apply(c config) {
	s.t.Helper()
	s.last = c
	if err := s.cli("apply", c); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) cli(command string, c config) error {
	if err := os.WriteFile(filepath.Join(s.dir, "main.tf"), []byte(s.hcl(c)), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(gpusliceCLI(s.t), command, s.dir, "-stack", s.name, "-auto-approve")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.env.Cluster.KubeconfigPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gpuslice %s (image %s): %v\n%s", command, c.image, err, out)
	}
	return nil
}

// destroy removes the stack (the plugin too, whatever still holds slices)
// and waits until no plugin pod is left on the nodes, so the next test's
// plugin is the only one.
func (s *stack) destroy() {
	c := s.last
	if c.image == "" {
		return // nothing applied
	}
	c.forceDestroy = true
	if err := s.cli("apply", c); err != nil {
		s.t.Error(err)
	}
	if err := s.cli("destroy", c); err != nil {
		s.t.Error(err)
	}
	client := s.env.Cluster.Client()
	realnodetest.Eventually(s.t, 2*time.Minute, "the node plugin pods gone", func() (bool, string) {
		pods, err := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: pluginSelector})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
}

const pluginSelector = "app.kubernetes.io/name=gpuslice-nodeplugin"

// workload waits for the job's pod to hold its memory and returns it.
func (s *stack) workload(name string) *workload {
	s.t.Helper()
	client := s.env.Cluster.Client()
	ctx := context.Background()
	i := slices.IndexFunc(s.last.jobs, func(j job) bool { return j.name == name })
	if i < 0 {
		s.t.Fatalf("no job %s in the applied configuration", name)
	}
	j := s.last.jobs[i]
	w := &workload{job: j}
	realnodetest.Eventually(s.t, 3*time.Minute, "job "+name+" holding its memory", func() (bool, string) {
		pods, err := client.CoreV1().Pods(s.tenant).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
		if err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprintf("%v, %d pods", err, len(pods.Items))
		}
		p := &pods.Items[0]
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false, fmt.Sprintf("pod %s: %s %v", p.Name, p.Status.Phase, p.Status.Conditions)
		}
		logs := s.containerLogs(p, false)
		w.pod = p
		return strings.Contains(logs, fmt.Sprintf("slice-check: holding %d MiB", j.holdMiB())), logs
	})
	if logs := s.containerLogs(w.pod, false); !strings.Contains(logs, fmt.Sprintf("%d MiB total", j.totalMiB())) {
		s.t.Fatalf("job %s does not see its %d MiB slice:\n%s", name, j.totalMiB(), logs)
	}
	w.container = w.pod.Status.ContainerStatuses[0].ContainerID
	if w.node = s.env.Node(w.pod.Spec.NodeName); w.node == nil {
		s.t.Fatalf("pod %s on %q, not a real node", w.pod.Name, w.pod.Spec.NodeName)
	}
	claimName := w.pod.Status.ResourceClaimStatuses
	if len(claimName) != 1 || claimName[0].ResourceClaimName == nil {
		s.t.Fatalf("pod %s has claims %v, want one", w.pod.Name, claimName)
	}
	claim, err := client.ResourceV1().ResourceClaims(s.tenant).Get(ctx, *claimName[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	w.claim = string(claim.UID)
	s.t.Logf("job %s runs on %s with claim %s", name, w.node.Name, w.claim)
	return w
}

// waitPlugins waits until on every node a Ready plugin pod runs image and
// has saved its checkpoint as rel does, holding exactly the claims of ws on
// that node, which its metrics count: it has restored them.
func (s *stack) waitPlugins(rel release, image string, ws ...*workload) {
	s.t.Helper()
	for _, n := range s.env.Nodes {
		var want []string
		var onNode []*workload
		for _, w := range ws {
			if w.node == n {
				want = append(want, w.claim)
				onNode = append(onNode, w)
			}
		}
		slices.Sort(want)
		format := rel(onNode)
		realnodetest.Eventually(s.t, 3*time.Minute, fmt.Sprintf("plugin %s on %s restoring %v in checkpoint %s", image, n.Name, want, format), func() (bool, string) {
			if p := s.readyPluginPod(n, image); p == nil {
				return false, "no Ready plugin pod running the image: " + s.pluginPods()
			}
			version, claims, err := readCheckpoint(n)
			if err != nil {
				return false, err.Error()
			}
			var got []string
			for uid, c := range claims {
				if c.State == checkpoint.PrepareCompleted {
					got = append(got, uid)
				}
			}
			slices.Sort(got)
			prepared, err := scrape(n, "gpuslice_prepared_claims")
			state := fmt.Sprintf("checkpoint %s with %v; gpuslice_prepared_claims %s (%v)", version, got, prepared, err)
			return version == format && slices.Equal(got, want) && prepared == strconv.Itoa(len(want)), state
		})
		for _, w := range onNode {
			if _, err := os.Stat(filepath.Join(n.CDIDir(), cdispec.SpecName(w.claim))); err != nil {
				s.t.Errorf("claim %s of job %s on %s has no CDI spec under %s: %v", w.claim, w.name, n.Name, image, err)
			}
		}
	}
}

// requireLimited checks that each workload's container runs on, the one it
// started with, and that a new process in it sees its slice, with what the
// workload holds counted, and is refused an allocation past it.
func (s *stack) requireLimited(ws ...*workload) {
	s.t.Helper()
	for _, w := range ws {
		p, err := s.env.Cluster.Client().CoreV1().Pods(w.pod.Namespace).Get(context.Background(), w.pod.Name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		if c := p.Status.ContainerStatuses[0]; c.ContainerID != w.container || c.State.Running == nil || c.RestartCount != 0 {
			s.t.Errorf("job %s's container: %s, want %s running since it started", w.name, c.String(), w.container)
		}
		out, err := s.exec(p, "slice-check")
		if err != nil {
			s.t.Errorf("slice-check in job %s's container: %v\n%s", w.name, err, out)
			continue
		}
		// Charged to the claim: what the workload holds, and a CUDA
		// context each for it and the new process.
		free := w.totalMiB() - w.holdMiB() - 2*(shim.DefaultContextOverhead>>20)
		for _, want := range []string{
			fmt.Sprintf("%d MiB total, %d MiB free", w.totalMiB(), free),
			fmt.Sprintf("allocated %d MiB in", free/256*256), // slice-check allocates 256 MiB blocks
			"slice-check: the slice held",
		} {
			if !strings.Contains(out, want) {
				s.t.Errorf("job %s's container does not see its slice with %d MiB held (no %q):\n%s", w.name, w.holdMiB(), want, out)
			}
		}
	}
}

// waitUnprepared waits until the claims' CDI specs and accounting
// directories are gone from their nodes.
func (s *stack) waitUnprepared(ws ...*workload) {
	s.t.Helper()
	for _, w := range ws {
		spec := filepath.Join(w.node.CDIDir(), cdispec.SpecName(w.claim))
		acct := filepath.Join(w.node.AccountingDir(), w.claim)
		realnodetest.Eventually(s.t, 2*time.Minute, "claim "+w.claim+" of job "+w.name+" unprepared", func() (bool, string) {
			_, specErr := os.Stat(spec)
			_, acctErr := os.Stat(acct)
			return os.IsNotExist(specErr) && os.IsNotExist(acctErr), fmt.Sprintf("spec: %v, accounting dir: %v", specErr, acctErr)
		})
	}
}

// pluginPod returns the plugin pod on n.
func (s *stack) pluginPod(n *realnode.Node) *corev1.Pod {
	s.t.Helper()
	p := s.pluginPodRunning(n, "")
	if p == nil {
		s.t.Fatalf("no plugin pod on %s: %s", n.Name, s.pluginPods())
	}
	return p
}

// pluginPodRunning returns the plugin pod on n, not being deleted, whose
// container is image ("" for any), or nil.
func (s *stack) pluginPodRunning(n *realnode.Node, image string) *corev1.Pod {
	pods, err := s.env.Cluster.Client().CoreV1().Pods(s.platform).List(context.Background(), metav1.ListOptions{
		LabelSelector: pluginSelector, FieldSelector: "spec.nodeName=" + n.Name})
	if err != nil {
		return nil
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && (image == "" || p.Spec.Containers[0].Image == image) {
			return p
		}
	}
	return nil
}

// readyPluginPod is pluginPodRunning's pod once Ready, or nil.
func (s *stack) readyPluginPod(n *realnode.Node, image string) *corev1.Pod {
	p := s.pluginPodRunning(n, image)
	if p == nil {
		return nil
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return p
		}
	}
	return nil
}

func (s *stack) pluginPods() string {
	pods, err := s.env.Cluster.Client().CoreV1().Pods(s.platform).List(context.Background(), metav1.ListOptions{LabelSelector: pluginSelector})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("%s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Spec.Containers[0].Image))
	}
	return strings.Join(out, "; ")
}

// containerLogs returns the pod's container log, its previous run's with
// previous, or the error reading it.
func (s *stack) containerLogs(p *corev1.Pod, previous bool) string {
	raw, err := s.env.Cluster.Client().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Previous: previous}).DoRaw(context.Background())
	if err != nil {
		return err.Error()
	}
	return string(raw)
}

// exec runs command in the pod's container, as kubectl exec does, and
// returns its output.
func (s *stack) exec(p *corev1.Pod, command ...string) (string, error) {
	cfg := s.env.Cluster.RESTConfig()
	req := s.env.Cluster.Client().CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: p.Spec.Containers[0].Name, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return "", err
	}
	e, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One buffer each: the executor writes the two streams concurrently.
	var stdout, stderr bytes.Buffer
	err = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	return stdout.String() + stderr.String(), err
}

// rewriteCheckpoint replaces the node's checkpoint with change(its
// content), under the plugin's lock, and returns what it wrote.
func (s *stack) rewriteCheckpoint(n *realnode.Node, change func([]byte) []byte) []byte {
	s.t.Helper()
	f, err := checkpoint.Open(n.StateDir())
	if err != nil {
		s.t.Fatal(err)
	}
	unlock, err := f.Lock()
	if err != nil {
		s.t.Fatal(err)
	}
	defer unlock()
	data, err := os.ReadFile(f.Path())
	if err != nil {
		s.t.Fatal(err)
	}
	changed := change(data)
	if bytes.Equal(changed, data) {
		s.t.Fatalf("the change left the checkpoint as it was:\n%s", data)
	}
	if err := os.WriteFile(f.Path(), changed, 0o600); err != nil {
		s.t.Fatal(err)
	}
	return changed
}

// requireEvent checks for a Warning Event on the node with reason whose
// note holds each of notes.
func (s *stack) requireEvent(n *realnode.Node, reason string, notes ...string) {
	s.t.Helper()
	events, err := s.env.Cluster.Client().EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	var seen []string
	for _, ev := range events.Items {
		if ev.Regarding.Kind != "Node" || ev.Regarding.Name != n.Name {
			continue
		}
		seen = append(seen, ev.Reason+": "+ev.Note)
		if ev.Reason != reason || ev.Type != corev1.EventTypeWarning {
			continue
		}
		missing := false
		for _, want := range notes {
			missing = missing || !strings.Contains(ev.Note, want)
		}
		if !missing {
			return
		}
	}
	s.t.Errorf("no Warning Event %s on node %s saying %q; its events: %q", reason, n.Name, notes, seen)
}

// readCheckpoint reads the node plugin's checkpoint on n: its format and
// its claims.
func readCheckpoint(n *realnode.Node) (string, map[string]checkpoint.Claim, error) {
	f, err := checkpoint.Open(n.StateDir())
	if err != nil {
		return "", nil, err
	}
	data, err := os.ReadFile(f.Path())
	if err != nil {
		return "", nil, err
	}
	var head struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return "", nil, fmt.Errorf("%s: %v", f.Path(), err)
	}
	cp, err := f.Load()
	if err != nil {
		return head.Version, nil, err
	}
	return head.Version, cp.Claims, nil
}

// metric reads one series of the node plugin's metrics on n.
func metric(t *testing.T, n *realnode.Node, series string) string {
	t.Helper()
	v, err := scrape(n, series)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func scrape(n *realnode.Node, series string) (string, error) {
	resp, err := http.Get("http://" + n.IP + ":" + strconv.Itoa(realnode.MetricsPort) + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("the node plugin on %s serves no %s", n.Name, series)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
