package nodes

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// showSlice prints what a container sees of its slice, then runs
// slice-check and stays up.
const showSlice = `nvidia-smi
printf 'preload: '; while read -r l; do printf '%s\n' "$l"; done < /etc/ld.so.preload
export -p
while read -r l; do case "$l" in *gpuslice*|*nvidia*|*libcuda*) printf 'mount: %s\n' "$l";; esac; done < /proc/self/mountinfo
exec slice-check --sleep`

// A workload's pod runs on a real node with exactly its package's slice:
// the limits, mounts and preload of its CDI spec, nvidia-smi showing 8 GiB,
// allocations refused past it, kernels paced; deleting it unprepares.
func TestContainerRunsOnItsSlice(t *testing.T) {
	env := realnodetest.Shared(t)
	dir := applyStack(t, env, "slice", stackHCL("slice", sliceCheckJob("check", "small", showSlice)))
	pod := jobPod(t, env, "slice", "check")
	logs := logsWith(t, env, pod, "", "slice-check: the slice held")

	if !strings.Contains(logs, "0MiB /   8192MiB") {
		t.Errorf("nvidia-smi in the container does not show the 8 GiB slice:\n%s", logs)
	}
	if !strings.Contains(logs, "preload: "+contract.ContainerLibraryPath) {
		t.Errorf("/etc/ld.so.preload does not load the shim:\n%s", logs)
	}
	for _, want := range []string{"8192 MiB total", "the next block: CUDA_ERROR_OUT_OF_MEMORY"} {
		if !strings.Contains(logs, want) {
			t.Errorf("slice-check output lacks %q:\n%s", want, logs)
		}
	}
	if m := regexp.MustCompile(`allocated (\d+) MiB`).FindStringSubmatch(logs); m == nil {
		t.Errorf("no allocation reported:\n%s", logs)
	} else if mib, _ := strconv.Atoi(m[1]); mib > 8192 || mib < 7000 {
		t.Errorf("allocated %d MiB on an 8192 MiB slice, want up to the slice less the context's overhead", mib)
	}
	// Pacing toward 25 %: unpaced, the kernels would hold the GPU ~100 %
	// of the time. (A lower bound would only measure the machine's load.)
	if m := regexp.MustCompile(`(\d+) % of the GPU's time`).FindStringSubmatch(logs); m == nil {
		t.Errorf("no kernel timing reported:\n%s", logs)
	} else if pct, _ := strconv.Atoi(m[1]); pct > 60 {
		t.Errorf("kernels held %d %% of the GPU's time on a 25 %% slice: not paced", pct)
	}

	// The container got exactly what the node plugin's spec for the claim
	// says: its environment and mounts.
	node := nodeOf(t, env, pod)
	uid := claimUID(t, env, pod)
	spec := cdiSpec(t, node, uid)
	edits := spec.Devices[0].ContainerEdits
	for _, kv := range edits.Env {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.Contains(logs, "export "+name+"='"+value+"'") {
			t.Errorf("container environment lacks %s from the CDI spec:\n%s", kv, logs)
		}
	}
	for _, want := range []string{contract.EnvMemoryLimit + "=8589934592", contract.EnvComputeShare + "=25"} {
		if !contains(edits.Env, want) {
			t.Errorf("CDI spec environment %v lacks %s (the package's slice)", edits.Env, want)
		}
	}
	for _, m := range edits.Mounts {
		if !strings.Contains(logs, " "+m.ContainerPath+" ") {
			t.Errorf("container has no mount at %s (from %s):\n%s", m.ContainerPath, m.HostPath, logs)
		}
	}

	destroyStack(t, env, dir, "slice")
	waitUnprepared(t, node, uid)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Two containers of one pod share their claim's budget: what one holds, the
// other cannot have.
func TestTwoContainersShareOneBudget(t *testing.T) {
	env := realnodetest.Shared(t)
	ctx := context.Background()
	applyStack(t, env, "budget", stackHCL("budget", ""))
	client := env.Cluster.Client()
	ns := "budget-shared"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "slice"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "budget-8gi"},
		}}}},
	}
	if _, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gpu := corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
	shared := []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "two", Namespace: ns},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("slice")}},
			Volumes:        []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			// The holder starts first and is started only once it holds
			// its 6 GiB; then the second container looks.
			InitContainers: []corev1.Container{{
				Name: "holder", Image: images.SliceCheck, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Command:      []string{"slice-check", "--hold", "6144", "--marker", "/shared/held"},
				Resources:    gpu,
				VolumeMounts: shared,
				StartupProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "test -e /shared/held"}}},
					PeriodSeconds: 1, FailureThreshold: 120,
				},
			}},
			Containers: []corev1.Container{{
				Name: "second", Image: images.SliceCheck, Command: []string{"slice-check", "--sleep"},
				Resources: gpu, VolumeMounts: shared,
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logsWith(t, env, pod, "holder", "holding 6144 MiB")
	logs := logsWith(t, env, pod, "second", "slice-check: the slice held")
	m := regexp.MustCompile(`allocated (\d+) MiB`).FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no allocation reported:\n%s", logs)
	}
	if mib, _ := strconv.Atoi(m[1]); mib+6144 > 8192 {
		t.Errorf("the second container allocated %d MiB while the first holds 6144 MiB of an 8192 MiB slice:\n%s", mib, logs)
	}

	node := nodeOf(t, env, pod)
	c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "slice", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods(ns).Delete(ctx, "two", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitUnprepared(t, node, string(c.UID))
}
