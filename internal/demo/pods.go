package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/devcluster"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
)

// slicePod is a workload's pod with its claim.
type slicePod struct {
	namespace, name, node string
	claim                 resourcev1.ResourceClaim
}

// podWithClaim waits until a pod in namespace whose name starts with prefix
// is bound and its claim allocated.
func (d *demo) podWithClaim(ctx context.Context, namespace, prefix string) (slicePod, error) {
	var last string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		pods, err := d.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			continue
		}
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Name, prefix) || p.Spec.NodeName == "" || len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
				continue
			}
			c, err := d.client.ResourceV1().ResourceClaims(namespace).Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
			if err != nil || c.Status.Allocation == nil {
				continue
			}
			return slicePod{namespace: namespace, name: p.Name, node: p.Spec.NodeName, claim: *c}, nil
		}
		last = fmt.Sprintf("%d pods, none bound with an allocated claim", len(pods.Items))
	}
	return slicePod{}, fmt.Errorf("no pod %s… in %s with an allocated claim within 2 minutes: %s", prefix, namespace, last)
}

// node is the real node p runs on.
func (d *demo) node(p slicePod) (devcluster.RealNode, error) {
	for _, n := range d.state.RealNodes {
		if n.Name == p.node {
			return n, nil
		}
	}
	return devcluster.RealNode{}, fmt.Errorf("pod %s runs on %s, not on a real node", p.name, p.node)
}

// preparedSpec waits for the CDI spec the node plugin wrote for p's claim
// when the kubelet called NodePrepareResources.
func (d *demo) preparedSpec(p slicePod) (*specs.Spec, string, error) {
	n, err := d.node(p)
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(n.CDIDir, cdispec.SpecName(string(p.claim.UID)))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		data, err := os.ReadFile(path)
		if err == nil {
			var s specs.Spec
			if err := json.Unmarshal(data, &s); err != nil {
				return nil, "", fmt.Errorf("%s: %w", path, err)
			}
			return &s, path, nil
		}
		if time.Now().After(deadline) {
			return nil, "", fmt.Errorf("the kubelet of %s did not prepare claim %s within a minute: %w", p.node, p.claim.Name, err)
		}
	}
}

// showOllama shows the quickstart's pod: its slice, the spec its kubelet
// had prepared, and why it does not run here. It returns its node.
func (d *demo) showOllama(ctx context.Context) (string, error) {
	p, err := d.podWithClaim(ctx, "team-a", "ollama")
	if err != nil {
		return "", err
	}
	showClaim(p.claim)
	spec, path, err := d.preparedSpec(p)
	if err != nil {
		return "", err
	}
	fmt.Printf("\n     NodePrepareResources on %s wrote the claim's CDI spec:\n", p.node)
	showSpec(spec, path)
	if reason := d.imagePullFailure(ctx, p); reason != "" {
		fmt.Printf("\n     Pod %s: %s. This machine cannot reach Docker Hub, so Ollama's image never arrives:\n", p.name, reason)
		fmt.Printf("     the pod is scheduled and its slice prepared; it would start as soon as its image could be pulled.\n")
	}
	return p.node, nil
}

// imagePullFailure waits up to a minute for the kubelet to report that p's
// image cannot be pulled, and returns how it says so.
func (d *demo) imagePullFailure(ctx context.Context, p slicePod) string {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		pod, err := d.client.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		for _, c := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			if w := c.State.Waiting; w != nil && strings.Contains(w.Reason, "ImagePull") {
				return fmt.Sprintf("%s (%s)", w.Reason, c.Image)
			}
		}
	}
	return ""
}

// showChecks waits for each slice-check job's report and prints it as the
// container wrote it.
func (d *demo) showChecks(ctx context.Context, namespace string, jobs []string) ([]slicePod, error) {
	var out []slicePod
	for _, job := range jobs {
		p, err := d.podWithClaim(ctx, namespace, job+"-")
		if err != nil {
			return nil, err
		}
		logs, err := d.waitForLog(ctx, p, "slice-check: the slice held")
		if err != nil {
			return nil, err
		}
		r := p.claim.Status.Allocation.Devices.Results[0]
		fmt.Printf("     $ kubectl logs -n %s %s      (on %s, slice %s)\n", namespace, p.name, p.node, r.Device)
		indent(logs)
		fmt.Println()
		out = append(out, p)
	}
	if len(out) == 2 && out[0].node == out[1].node {
		fmt.Printf("     Both run at once on %s's one V100: the scheduler placed %s and %s against its shared counters\n",
			out[0].node, out[0].claim.Status.Allocation.Devices.Results[0].Device, out[1].claim.Status.Allocation.Devices.Results[0].Device)
		fmt.Printf("     (with Ollama's 25 %%, 100 %% of the GPU's memory and compute are now allocated).\n")
	}
	return out, nil
}

func (d *demo) waitForLog(ctx context.Context, p slicePod, want string) (string, error) {
	var logs string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		raw, err := d.client.CoreV1().Pods(p.namespace).GetLogs(p.name, &corev1.PodLogOptions{}).DoRaw(ctx)
		logs = string(raw)
		if err == nil && strings.Contains(logs, want) {
			return logs, nil
		}
	}
	return "", fmt.Errorf("pod %s did not print %q within 2 minutes; its log:\n%s", p.name, want, logs)
}

// showUnprepare deletes p's job and shows its claim's files leaving the node.
func (d *demo) showUnprepare(ctx context.Context, p slicePod) error {
	n, err := d.node(p)
	if err != nil {
		return err
	}
	uid := string(p.claim.UID)
	spec := filepath.Join(n.CDIDir, cdispec.SpecName(uid))
	acct := filepath.Join(n.AccountingDir, uid)
	fmt.Printf("     before: %s\n             %s\n", spec, acct)
	job := strings.TrimSuffix(p.name, p.name[strings.LastIndex(p.name, "-"):])
	fmt.Printf("     $ kubectl delete job -n %s %s\n", p.namespace, job)
	if err := d.client.BatchV1().Jobs(p.namespace).Delete(ctx, job, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		return err
	}
	started := time.Now()
	for deadline := started.Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, specErr := os.Stat(spec)
		_, acctErr := os.Stat(acct)
		if os.IsNotExist(specErr) && os.IsNotExist(acctErr) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("claim %s still prepared on %s two minutes after its pod was deleted", p.claim.Name, p.node)
		}
	}
	fmt.Printf("     after %.1f s: both gone — the kubelet called NodeUnprepareResources when the pod went, and the slice is free again.\n", time.Since(started).Seconds())
	return nil
}

// setUnschedulable cordons or uncordons a node, as kubectl cordon does.
func setUnschedulable(ctx context.Context, client kubernetes.Interface, node string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	_, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func showSpec(spec *specs.Spec, path string) {
	fmt.Printf("     %s\n", path)
	edits := spec.Devices[0].ContainerEdits
	fmt.Printf("       env:\n")
	for _, e := range edits.Env {
		fmt.Printf("         %s\n", e)
	}
	fmt.Printf("       mounts:\n")
	for _, m := range edits.Mounts {
		fmt.Printf("         %-48s → %s\n", filepath.Base(m.HostPath), m.ContainerPath)
	}
	var nodes []string
	for _, d := range edits.DeviceNodes {
		nodes = append(nodes, fmt.Sprintf("%s (%s %d:%d)", d.Path, d.Type, d.Major, d.Minor))
	}
	fmt.Printf("       device nodes: %s\n", strings.Join(nodes, " "))
}

// showPluginPods shows the node plugin's pods: one per real node, running
// the image from the local registry.
func (d *demo) showPluginPods(ctx context.Context) error {
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		pods, err := d.client.CoreV1().Pods("gpuslice-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gpuslice-nodeplugin"})
		running := 0
		if err == nil {
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
		}
		if err == nil && running == len(d.state.RealNodes) && d.everyNodePublished(ctx) {
			for _, p := range pods.Items {
				fmt.Printf("     pod %-32s on %-10s %s\n", p.Name, p.Spec.NodeName, p.Spec.Containers[0].Image)
			}
			fmt.Println()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node plugin's pods are not running and publishing on every node within 2 minutes (%d of %d running; %v)", running, len(d.state.RealNodes), err)
		}
	}
}

// everyNodePublished says whether every real node's plugin has published
// its slices: a running pod has not necessarily done so yet.
func (d *demo) everyNodePublished(ctx context.Context) bool {
	list, err := d.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + contract.DriverName})
	if err != nil {
		return false
	}
	published := map[string]bool{}
	for _, s := range list.Items {
		if s.Spec.NodeName != nil {
			published[*s.Spec.NodeName] = true
		}
	}
	for _, n := range d.state.RealNodes {
		if !published[n.Name] {
			return false
		}
	}
	return true
}
