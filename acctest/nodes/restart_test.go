package nodes

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
)

// claimState is what must not change about a prepared claim while its pod
// runs: its spec, and its accounting region (a new one would forget what
// the pod holds).
type claimState struct {
	spec       []byte
	regionIno  uint64
	containers string
}

func stateOf(t *testing.T, env *realnodetest.Env, n *realnode.Node, pod *corev1.Pod, uid string) claimState {
	t.Helper()
	spec, err := os.ReadFile(filepath.Join(n.CDIDir(), cdispec.SpecName(uid)))
	if err != nil {
		t.Fatalf("CDI spec of claim %s: %v", uid, err)
	}
	info, err := os.Stat(filepath.Join(n.AccountingDir(), uid, contract.RegionFile))
	if err != nil {
		t.Fatalf("accounting region of claim %s: %v", uid, err)
	}
	p, err := env.Cluster.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var containers []string
	for _, c := range p.Status.ContainerStatuses {
		containers = append(containers, c.ContainerID)
	}
	return claimState{spec: spec, regionIno: info.Sys().(*syscall.Stat_t).Ino, containers: strings.Join(containers, ",")}
}

func requireSameState(t *testing.T, what string, before, after claimState) {
	t.Helper()
	if !bytes.Equal(before.spec, after.spec) {
		t.Errorf("%s changed the claim's CDI spec:\nbefore %s\nafter  %s", what, before.spec, after.spec)
	}
	if before.regionIno != after.regionIno {
		t.Errorf("%s recreated the claim's accounting region (what the pod holds would be forgotten)", what)
	}
	if before.containers != after.containers {
		t.Errorf("%s restarted the pod's container: %s, then %s", what, before.containers, after.containers)
	}
}

// preparedClaims reads the node plugin's gpuslice_prepared_claims gauge.
func preparedClaims(t *testing.T, n *realnode.Node) string {
	t.Helper()
	resp, err := http.Get("http://" + n.IP + ":" + strconv.Itoa(realnode.MetricsPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "gpuslice_prepared_claims "); ok {
			return v
		}
	}
	t.Fatalf("the node plugin serves no gpuslice_prepared_claims:\n%s", body)
	return ""
}

// runningSlice applies a stack with one sleeping slice-check job and
// returns its pod once the slice held, with node and claim.
func runningSlice(t *testing.T, env *realnodetest.Env, stack string) (string, *corev1.Pod, *realnode.Node, string) {
	t.Helper()
	dir := applyStack(t, env, stack, stackHCL(stack, sliceCheckJob("sleeper", "small", "exec slice-check --sleep")))
	pod := jobPod(t, env, stack, "sleeper")
	logsWith(t, env, pod, "", "slice-check: the slice held")
	return dir, pod, nodeOf(t, env, pod), claimUID(t, env, pod)
}

// A kubelet restart with a pod running neither prepares its claim anew nor
// loses it, and the claim is unprepared when the pod goes.
func TestKubeletRestartKeepsClaim(t *testing.T) {
	env := realnodetest.Shared(t)
	dir, pod, node, uid := runningSlice(t, env, "kubelet-restart")
	before := stateOf(t, env, node, pod, uid)

	if err := node.RestartKubelet(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The restarted kubelet has synced once it runs a new pod.
	reapply(t, env, dir, "kubelet-restart", stackHCL("kubelet-restart",
		sliceCheckJob("sleeper", "small", "exec slice-check --sleep")+sliceCheckJob("after", "small", "exec slice-check --sleep")))
	logsWith(t, env, jobPod(t, env, "kubelet-restart", "after"), "", "slice-check: the slice held")

	requireSameState(t, "a kubelet restart", before, stateOf(t, env, node, pod, uid))
	if got := preparedClaims(t, node); got != "2" {
		t.Errorf("node plugin reports %s prepared claims, want 2 (the running pod's and the new one's)", got)
	}
	destroyStack(t, env, dir, "kubelet-restart")
	waitUnprepared(t, node, uid)
}

// A node plugin restart (a crash, an upgrade) with a pod running keeps it
// running on its slice, and the new plugin unprepares it afterwards.
func TestNodePluginRestartKeepsPods(t *testing.T) {
	env := realnodetest.Shared(t)
	dir, pod, node, uid := runningSlice(t, env, "plugin-restart")
	before := stateOf(t, env, node, pod, uid)

	node.KillNodePlugin()
	if err := node.StartNodePlugin(context.Background()); err != nil {
		t.Fatal(err)
	}
	requireSameState(t, "a node plugin restart", before, stateOf(t, env, node, pod, uid))
	if got := preparedClaims(t, node); got != "1" {
		t.Errorf("restarted node plugin reports %s prepared claims, want 1 (from its checkpoint)", got)
	}
	destroyStack(t, env, dir, "plugin-restart")
	waitUnprepared(t, node, uid)
}

// A reboot empties /run (CDI specs, accounting regions) and changes the
// boot ID: the plugin recreates the specs of prepared claims, and the pod's
// container comes back on its slice.
func TestNodeRebootRecreatesSpecs(t *testing.T) {
	env := realnodetest.Shared(t)
	dir, pod, node, uid := runningSlice(t, env, "reboot")
	spec := filepath.Join(node.CDIDir(), cdispec.SpecName(uid))

	if err := node.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	realnodetest.Eventually(t, 2*time.Minute, "the pod's container restarted after the reboot", func() (bool, string) {
		p, err := env.Cluster.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, errString(err)
		}
		c := p.Status.ContainerStatuses[0]
		return c.RestartCount > 0 && c.State.Running != nil, c.String()
	})
	if _, err := os.Stat(spec); err != nil {
		t.Fatalf("CDI spec of claim %s after the reboot: %v", uid, err)
	}
	// The restarted container's own output: the slice holds again.
	logs := logsWith(t, env, pod, "", "slice-check: the slice held")
	if !strings.Contains(logs, "8192 MiB total") {
		t.Errorf("after the reboot the container does not see its 8 GiB slice:\n%s", logs)
	}
	destroyStack(t, env, dir, "reboot")
	waitUnprepared(t, node, uid)
}
