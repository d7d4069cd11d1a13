// Package daemonset runs the node plugin the way users do: its image,
// built in Go and pulled from a registry, as a DaemonSet pod on each real
// node, deployed from the chart (rendered by Helm's engine), with host paths
// for the kubelet plugin directories, CDI specs, driver root and accounting.
package daemonset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/deploy"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

const namespace = "gpuslice-system"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gpuslice-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cliPath = filepath.Join(dir, "gpuslice")
	return realnodetest.Main(m, realnodetest.Options{Names: []string{"ds-1", "ds-2"}, NoNodePlugin: true})
}

var (
	cliPath  string
	cliOnce  sync.Once
	cliBuild error
)

// gpusliceCLI builds the gpuslice CLI, once, for the tests that apply
// stacks the way users do.
func gpusliceCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		if out, err := exec.Command("go", "build", "-o", cliPath, "github.com/gpuslice/gpuslice/cmd/gpuslice").CombinedOutput(); err != nil {
			cliBuild = fmt.Errorf("build gpuslice: %v\n%s", err, out)
		}
	})
	if cliBuild != nil {
		t.Fatal(cliBuild)
	}
	return cliPath
}

// values are the chart's values for the local cluster: the image from the
// local registry, the simulated GPU and driver, and where the API server
// is (on loopback: the plugin's pod uses the host's network).
func values(c *cluster.Cluster, image string) map[string]any {
	repo, rest, _ := strings.Cut(image, ":")
	tag, digest, _ := strings.Cut(rest, "@")
	port := c.Host[strings.LastIndex(c.Host, ":")+1:]
	return map[string]any{
		"image":         map[string]any{"repository": repo, "tag": tag, "digest": digest},
		"driverRoot":    realnode.DriverRoot,
		"simulatedGPUs": "v100-32gb:1",
		"env":           map[string]any{"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port},
	}
}

// install applies the chart's objects (create or update).
func install(t *testing.T, client kubernetes.Interface, vals map[string]any) {
	t.Helper()
	objs, err := deploy.Render(namespace, vals)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cluster.CreateNamespace(ctx, client, namespace, nil); err != nil && !apierrors.IsAlreadyExists(errors.Unwrap(err)) && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := apply(ctx, client, o); err != nil {
			t.Fatalf("%T: %v", o, err)
		}
	}
}

// uninstall deletes the chart's objects install applied and waits until
// no plugin pod is left: the next test installs the node plugin its own
// way, and two plugins must not serve one node.
func uninstall(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	objs, err := deploy.Render(namespace, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range objs {
		var err error
		del := metav1.DeleteOptions{}
		switch v := o.(type) {
		case *corev1.ServiceAccount:
			err = client.CoreV1().ServiceAccounts(v.Namespace).Delete(ctx, v.Name, del)
		case *rbacv1.ClusterRole:
			err = client.RbacV1().ClusterRoles().Delete(ctx, v.Name, del)
		case *rbacv1.ClusterRoleBinding:
			err = client.RbacV1().ClusterRoleBindings().Delete(ctx, v.Name, del)
		case *admissionv1.ValidatingAdmissionPolicy:
			err = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, v.Name, del)
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			err = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, v.Name, del)
		case *appsv1.DaemonSet:
			err = client.AppsV1().DaemonSets(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		default:
			err = fmt.Errorf("no delete for %T", o)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("uninstall the node plugin: %v", err)
		}
	}
	realnodetest.Eventually(t, 2*time.Minute, "the node plugin pods gone", func() (bool, string) {
		pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: pluginSelector})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
}

func apply(ctx context.Context, client kubernetes.Interface, o runtime.Object) error {
	create := metav1.CreateOptions{}
	var err error
	switch v := o.(type) {
	case *corev1.ServiceAccount:
		_, err = client.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, create)
	case *rbacv1.ClusterRole:
		_, err = client.RbacV1().ClusterRoles().Create(ctx, v, create)
	case *rbacv1.ClusterRoleBinding:
		_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, v, create)
	case *admissionv1.ValidatingAdmissionPolicy:
		_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, v, create)
	case *admissionv1.ValidatingAdmissionPolicyBinding:
		_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, v, create)
	case *appsv1.DaemonSet:
		cur, getErr := client.AppsV1().DaemonSets(v.Namespace).Get(ctx, v.Name, metav1.GetOptions{})
		if getErr == nil {
			v.ResourceVersion = cur.ResourceVersion
			_, err = client.AppsV1().DaemonSets(v.Namespace).Update(ctx, v, metav1.UpdateOptions{})
		} else {
			_, err = client.AppsV1().DaemonSets(v.Namespace).Create(ctx, v, create)
		}
	default:
		return fmt.Errorf("no apply for %T", o)
	}
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	return err
}

// pluginPods waits until a plugin pod runs image on every node and both
// nodes' slices are published, and returns the pods by node.
func pluginPods(t *testing.T, env *realnodetest.Env, image string) map[string]corev1.Pod {
	t.Helper()
	client := env.Cluster.Client()
	out := map[string]corev1.Pod{}
	realnodetest.Eventually(t, 3*time.Minute, "plugin pods running "+image+" and slices published", func() (bool, string) {
		pods, err := client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: pluginSelector})
		if err != nil {
			return false, err.Error()
		}
		clear(out)
		var state []string
		for _, p := range pods.Items {
			ready := p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == image
			state = append(state, fmt.Sprintf("%s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Spec.Containers[0].Image))
			if ready {
				out[p.Spec.NodeName] = p
			}
		}
		for _, n := range env.Nodes {
			if _, ok := out[n.Name]; !ok {
				return false, strings.Join(state, "; ")
			}
			slices, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
			if err != nil || len(slices.Items) == 0 {
				return false, "no slices on " + n.Name
			}
		}
		return true, ""
	})
	return out
}

// The node plugin's image runs as a DaemonSet pod on each real node,
// registers with its kubelet, publishes the node's slices and prepares a
// claim: a container then runs on its 8 GiB slice. Changing the image rolls
// the DaemonSet; the running pod keeps its slice and its shim (the
// content-hashed library file is not touched), and the new plugin
// unprepares it.
func TestNodePluginDaemonSet(t *testing.T) {
	env := realnodetest.Shared(t)
	client := env.Cluster.Client()
	v1 := env.PushNodePlugin(t, "0.1.0")
	install(t, client, values(env.Cluster, v1))
	t.Cleanup(func() { uninstall(t, client) })
	pods := pluginPods(t, env, v1)
	t.Logf("plugin pods: %d", len(pods))

	ctx := context.Background()
	quarter := &spec.Package{Name: "ds-8gi", GPUModel: simulate.V100PCIe32GB.Name, Fraction: 25}
	_, err := client.ResourceV1().DeviceClasses().Create(ctx, render.DeviceClass(quarter), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim, err := client.ResourceV1().ResourceClaims("default").Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "ds-slice"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "ds-8gi"},
		}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-slice", Namespace: "default"},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("ds-slice")}},
			Containers: []corev1.Container{{
				Name: "c", Image: images.SliceCheck, Command: []string{"sh", "-c", "nvidia-smi; exec slice-check --sleep"},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs := logsWith(t, client, pod.Name, "slice-check: the slice held")
	if !strings.Contains(logs, "8192MiB") || !strings.Contains(logs, "8192 MiB total") {
		t.Errorf("the container does not see its 8 GiB slice:\n%s", logs)
	}
	p, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := env.Node(p.Spec.NodeName)
	if node == nil {
		t.Fatalf("pod on %q, not a real node", p.Spec.NodeName)
	}
	containerID := p.Status.ContainerStatuses[0].ContainerID
	shims, err := filepath.Glob(filepath.Join(node.Dir, "gpuslice", "shim", "libgpuslice-*.so"))
	if err != nil || len(shims) != 1 {
		t.Fatalf("the plugin pod installed %v shim libraries on %s (%v), want 1", shims, node.Name, err)
	}
	before, err := os.Stat(shims[0])
	if err != nil {
		t.Fatal(err)
	}

	// Upgrade: a new image, the DaemonSet rolls.
	v2 := env.PushNodePlugin(t, "0.1.1")
	install(t, client, values(env.Cluster, v2))
	newPods := pluginPods(t, env, v2)
	if newPods[node.Name].UID == pods[node.Name].UID {
		t.Fatalf("the plugin pod on %s was not replaced", node.Name)
	}
	p, err = client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Status.ContainerStatuses[0]; c.ContainerID != containerID || c.State.Running == nil {
		t.Errorf("the sliced pod's container after the upgrade: %+v, want %s still running", c, containerID)
	}
	after, err := os.Stat(shims[0])
	if err != nil {
		t.Fatalf("the shim library the running pod maps is gone after the upgrade: %v", err)
	}
	if after.ModTime() != before.ModTime() || after.Sys().(*syscall.Stat_t).Ino != before.Sys().(*syscall.Stat_t).Ino {
		t.Errorf("the upgrade replaced %s, which the running pod has mapped", shims[0])
	}

	// The new plugin unprepares the claim the old one prepared.
	if err := client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(node.CDIDir(), "gpuslice.dev-claim_"+string(claim.UID)+".json")
	acct := filepath.Join(node.AccountingDir(), string(claim.UID))
	realnodetest.Eventually(t, 2*time.Minute, "the new plugin unprepares the claim", func() (bool, string) {
		_, specErr := os.Stat(spec)
		_, acctErr := os.Stat(acct)
		return os.IsNotExist(specErr) && os.IsNotExist(acctErr), fmt.Sprintf("spec: %v, accounting: %v", specErr, acctErr)
	})
}

func logsWith(t *testing.T, client kubernetes.Interface, pod, want string) string {
	t.Helper()
	var logs string
	realnodetest.Eventually(t, 2*time.Minute, "log line "+want, func() (bool, string) {
		raw, err := client.CoreV1().Pods("default").GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
		logs = string(raw)
		if err != nil {
			p, _ := client.CoreV1().Pods("default").Get(context.Background(), pod, metav1.GetOptions{})
			if p != nil {
				return false, fmt.Sprintf("%v: %s %+v", err, p.Status.Phase, p.Status.ContainerStatuses)
			}
			return false, err.Error()
		}
		return strings.Contains(logs, want), logs
	})
	return logs
}
