package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// migGPUs is the MIG node's hardware: an A100 in MIG mode with two 1g.5gb
// and one 3g.20gb instance.
const migGPUs = "a100-40gb:1,mig=1g.5gb*2,3g.20gb"

// showMIG prints what a container sees of its GPU, then runs slice-check
// listing its device nodes, and stays up.
const showMIG = `nvidia-smi -L
nvidia-smi
printf 'preload: '; [ -e /etc/ld.so.preload ] && while read -r l; do printf '%s\n' "$l"; done < /etc/ld.so.preload; echo
export -p
exec slice-check --devices --sleep`

// A pod with a hand-written claim for a 1g.5gb MIG instance runs on a real
// node whose simulated A100 is in MIG mode, beside a V100 slice workload on
// another real node. The MIG container has exactly its parent's device
// node, the driver's and its instance's two capability nodes (with the
// driver's numbers), sees the profile's memory through nvidia-smi and CUDA,
// and has no shim; the V100 container still sees its 8 GiB slice. Deleting
// the pod unprepares the claim.
//
// The claim is hand-written, on a MIG package's class as the engine
// renders it, in a namespace that is not a tenant's.
func TestMIGWorkloadBesideAV100Slice(t *testing.T) {
	env := realnodetest.Shared(t)
	migEnv := realnodetest.Start(t, env.Cluster, realnodetest.Options{Names: []string{"mig-1"}, GPUs: migGPUs})
	node := migEnv.Node("mig-1")
	client := env.Cluster.Client()
	ctx := context.Background()

	dir := applyStack(t, env, "migv100", stackHCL("migv100", sliceCheckJob("check", "small", showSlice)))

	const ns, class = "mig-raw", "mig-1g-5gb-test"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	_, err := client.ResourceV1().DeviceClasses().Create(ctx, render.DeviceClass(&spec.Package{Name: class, GPUModel: simulate.A100SXM440GB.Name, MIGProfile: "1g.5gb"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.ResourceV1().DeviceClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "mig"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
		}}}},
	}
	if _, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mig", Namespace: ns},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("mig")}},
			Containers: []corev1.Container{{
				Name: "app", Image: images.SliceCheck, Command: []string{"sh", "-c", showMIG},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := logsWith(t, env, pod, "", "slice-check: the slice held")
	t.Logf("the MIG container:\n%s", logs)
	status := migStatus(t, env, ns, "mig")
	checkMIGContainer(t, logs, status, "1g.5gb", 4864)
	if m := realnodetest.Scrape(t, node); !strings.Contains(m, migMetric(status, ns, "mig")) {
		t.Errorf("the node plugin's metrics lack %s", migMetric(status, ns, "mig"))
	}

	// The V100 slice on the other node is as ever.
	v100 := logsWith(t, env, jobPod(t, env, "migv100", "check"), "", "slice-check: the slice held")
	if !strings.Contains(v100, "0MiB /   8192MiB") || !strings.Contains(v100, "preload: "+contract.ContainerLibraryPath) {
		t.Errorf("the V100 slice beside the MIG workload does not see its 8 GiB through the shim:\n%s", v100)
	}

	if err := client.CoreV1().Pods(ns).Delete(ctx, "mig", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitUnprepared(t, node, status.claimUID)
	destroyStack(t, env, dir, "migv100")
}

// checkMIGContainer checks what a container running showMIG printed on
// the claim of status, a MIG instance of profile with memoryMiB: nvidia-smi
// lists the instance under its GPU with the profile's memory, CUDA sees the
// same, both visible-devices variables name the instance, nothing limits it
// in software (no shim, no limit), and its device nodes are exactly its
// parent's, the driver's and its instance's two capability nodes (with the
// driver's numbers).
func checkMIGContainer(t *testing.T, logs string, status claimStatus, profile string, memoryMiB int) {
	t.Helper()
	if status.Sharing != contract.SharingMIG || status.MIGProfile != profile || !strings.HasPrefix(status.MIGUUID, "MIG-") {
		t.Fatalf("claim status %+v: want a %s MIG instance", status, profile)
	}
	if !regexp.MustCompile(`(?m)^GPU 0: NVIDIA A100-SXM4-40GB \(UUID: ` + regexp.QuoteMeta(status.GPUUUID) + `\)\n  MIG ` + regexp.QuoteMeta(profile) + ` +Device +0: \(UUID: ` + regexp.QuoteMeta(status.MIGUUID) + `\)$`).MatchString(logs) {
		t.Errorf("nvidia-smi -L does not list the instance under its GPU:\n%s", logs)
	}
	if !regexp.MustCompile(fmt.Sprintf(` 0MiB / +%dMiB \|`, memoryMiB)).MatchString(logs) {
		t.Errorf("nvidia-smi does not show the instance's %d MiB:\n%s", memoryMiB, logs)
	}
	for _, want := range []string{fmt.Sprintf("NVIDIA A100-SXM4-40GB MIG %s, %d MiB total", profile, memoryMiB), "preload: \n",
		"export CUDA_VISIBLE_DEVICES='" + status.MIGUUID + "'", "export NVIDIA_VISIBLE_DEVICES='" + status.MIGUUID + "'"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the MIG container's output lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, contract.EnvMemoryLimit) || strings.Contains(logs, contract.ContainerLibraryPath) {
		t.Errorf("a MIG container is limited in software (shim or limit):\n%s", logs)
	}
	giMinor, ciMinor := simulate.MIGMinors(0, status.MIGGPUInstance, status.MIGComputeInstance)
	want := []string{"/dev/nvidia0 c 195:0", "/dev/nvidiactl c 195:255", "/dev/nvidia-uvm c 235:0", "/dev/nvidia-uvm-tools c 235:1",
		fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d c %d:%d", giMinor, simulate.CapsMajor, giMinor),
		fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d c %d:%d", ciMinor, simulate.CapsMajor, ciMinor)}
	var got []string
	for _, m := range regexp.MustCompile(`slice-check: device node (.+)`).FindAllStringSubmatch(logs, -1) {
		got = append(got, m[1])
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the MIG container's device nodes:\n%s\nwant exactly:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// migMetric is the node plugin's metric line for claim ns/name of status.
func migMetric(status claimStatus, ns, name string) string {
	return fmt.Sprintf(`gpuslice_claim_mig_instance{UUID=%q,claim=%q,claim_uid=%q,compute_instance="%d",gpu_instance="%d",mig_uuid=%q,namespace=%q,profile=%q} 1`,
		status.GPUUUID, name, status.claimUID, status.MIGComputeInstance, status.MIGGPUInstance, status.MIGUUID, ns, status.MIGProfile)
}

type claimStatus struct {
	driver.SliceStatus
	claimUID string
}

// migStatus waits for the node plugin's report in the claim's status.
func migStatus(t *testing.T, env *realnodetest.Env, ns, name string) claimStatus {
	t.Helper()
	var s claimStatus
	realnodetest.Eventually(t, time.Minute, "the prepared device's status in claim "+name, func() (bool, string) {
		c, err := env.Cluster.Client().ResourceV1().ResourceClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || len(c.Status.Devices) == 0 || c.Status.Devices[0].Data == nil {
			return false, errString(err)
		}
		s.claimUID = string(c.UID)
		return json.Unmarshal(c.Status.Devices[0].Data.Raw, &s.SliceStatus) == nil, string(c.Status.Devices[0].Data.Raw)
	})
	return s
}
