package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/publish"
	"github.com/gpuslice/gpuslice/nodeplugin/simulate"
)

// childEnv carries a childConfig when the test binary is re-executed as a
// plugin process (the crash tests kill it with SIGKILL).
const childEnv = "GPUSLICE_NODEPLUGIN_TEST_CHILD"

type childConfig struct {
	Kubeconfig string
	Node       string
	Dir        string
	GPUs       int
	KillAt     driver.Step // SIGKILL itself right after this step
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(runChild(cfg))
	}
	os.Exit(clustertest.Main(m, cluster.Options{}, nil))
}

// runChild runs the plugin until SIGTERM, or until it kills itself.
func runChild(raw string) int {
	var cc childConfig
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cc.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	client := kubernetes.NewForConfigOrDie(rc)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg := pluginConfig(client, cc.Node, cc.Dir, cc.GPUs)
	cfg.AfterStep = func(s driver.Step) {
		if s == cc.KillAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns
		}
	}
	p, err := driver.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer p.Stop()
	if err := os.WriteFile(filepath.Join(cc.Dir, "ready"), []byte(fmt.Sprint(os.Getpid())), 0o600); err != nil {
		return 1
	}
	<-ctx.Done()
	return 0
}

// pluginConfig is a simulated node's plugin with every directory under dir,
// publishing the default partitions.
func pluginConfig(client kubernetes.Interface, node, dir string, gpus int) driver.Config {
	shimSource := filepath.Join(dir, "libgpuslice.so")
	if _, err := os.Stat(shimSource); err != nil {
		// the plugin installs the library, never loads it: any file will do
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(shimSource, []byte("stand-in for libgpuslice.so"), 0o644)
	}
	bootID := filepath.Join(dir, "boot_id")
	if _, err := os.Stat(bootID); err != nil {
		_ = os.WriteFile(bootID, []byte("boot-1\n"), 0o644)
	}
	lib := simulate.New(simulate.Spec{Profile: "v100-32gb", Count: gpus}, node)
	return driver.LocalDirs(driver.Config{SimulatedGPUs: true,
		NodeName: node, Client: client, NVML: lib, Publish: publish.Options{Fractions: contract.DefaultFractions},
		DriverRoot: filepath.Join(dir, "driver-root"), ShimSource: shimSource, BootIDFile: bootID,
		HealthPoll: 50 * time.Millisecond, Logger: klog.Background(),
	}, dir)
}

// env is one test's corner of the shared control plane: its own nodes and
// namespace, so tests never compete for devices.
type env struct {
	t      *testing.T
	tb     testing.TB // t, or a benchmark
	c      *cluster.Cluster
	client kubernetes.Interface
	ns     string
	ctx    context.Context
}

func newEnv(t *testing.T, nodes ...string) *env {
	c := clustertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, tb: t, c: c, client: c.Client(), ns: strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), ctx: ctx}
	for _, n := range nodes {
		if _, err := c.AddNode(ctx, cluster.NodeSpec{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cluster.CreateNamespace(ctx, e.client, e.ns, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

// startPlugin runs a plugin in this process for node.
func (e *env) startPlugin(node string, gpus int) (*driver.Plugin, driver.Config) {
	e.t.Helper()
	return e.startPluginWith(node, gpus, publish.Options{Fractions: contract.DefaultFractions})
}

// startPluginWith runs a plugin for node offering what o says.
func (e *env) startPluginWith(node string, gpus int, o publish.Options) (*driver.Plugin, driver.Config) {
	e.t.Helper()
	cfg := pluginConfig(e.client, node, filepath.Join(e.t.TempDir(), node), gpus)
	cfg.Publish = o
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(p.Stop)
	return p, cfg
}

// class creates the DeviceClass of a package of the V100 fraction, as the
// engine renders it.
func (e *env) class(fraction int) string {
	return e.packageClass(spec.Package{Name: fmt.Sprintf("%s-%dpct", e.ns, fraction), GPUModel: simulate.V100PCIe32GB.Name, Fraction: fraction})
}

// anySizeClass creates the DeviceClass of an any-size V100 package of
// memory (e.g. "6Gi") and compute percent, as the engine renders it.
func (e *env) anySizeClass(memory string, compute int) string {
	return e.packageClass(spec.Package{Name: fmt.Sprintf("%s-%s-%d", e.ns, strings.ToLower(memory), compute), GPUModel: simulate.V100PCIe32GB.Name,
		Memory: memory, ComputeShare: compute})
}

// timeSlicedClass creates the DeviceClass of a time-sliced V100 package of
// replicas per GPU, as the engine renders it.
func (e *env) timeSlicedClass(replicas int) string {
	return e.packageClass(spec.Package{Name: fmt.Sprintf("%s-ts-%d", e.ns, replicas), GPUModel: simulate.V100PCIe32GB.Name,
		Sharing: spec.SharingTimeSliced, Replicas: replicas})
}

// packageClass creates the package's DeviceClass as the engine renders it.
func (e *env) packageClass(p spec.Package) string {
	return e.createClass(render.DeviceClass(&p))
}

// classWith creates a class that is no package: only a selector.
func (e *env) classWith(name, selector string) string {
	return e.createClass(&resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: selector},
		}}},
	})
}

func (e *env) createClass(dc *resourcev1.DeviceClass) string {
	if _, err := e.client.ResourceV1().DeviceClasses().Create(e.ctx, dc, metav1.CreateOptions{}); err != nil {
		e.tb.Fatal(err)
	}
	e.tb.Cleanup(func() {
		_ = e.client.ResourceV1().DeviceClasses().Delete(context.Background(), dc.Name, metav1.DeleteOptions{})
	})
	return dc.Name
}

// waitSlices waits until node's plugin has published want devices.
func (e *env) waitSlices(node string, want int) []resourcev1.ResourceSlice {
	e.tb.Helper()
	var slices []resourcev1.ResourceSlice
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := e.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err
		}
		slices = list.Items
		n := 0
		for _, s := range slices {
			n += len(s.Spec.Devices)
		}
		return n == want, nil
	})
	if err != nil {
		e.tb.Fatalf("node %s: waiting for %d published devices: %v (slices: %d)", node, want, err, len(slices))
	}
	return slices
}

// runPod creates a claim template of the documented shape and a pod using
// it, pinned to node, and returns the claim the controller creates.
func (e *env) runPod(name, class, node string) string {
	e.tb.Helper()
	return e.runPodN(name, class, node, 1)
}

// runPodN is runPod with a request for count devices of the class (a
// multi-GPU pod).
func (e *env) runPodN(name, class, node string, count int64) string {
	e.tb.Helper()
	return e.runPodWith(name, node, resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count})
}

// runPodCapacity is runPod asking for capacity of a shared device, e.g.
// memory=6Gi, compute=20.
func (e *env) runPodCapacity(name, class, node string, requests map[string]string) string {
	e.tb.Helper()
	r := resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: 1, Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{}}}
	for k, v := range requests {
		r.Capacity.Requests[resourcev1.QualifiedName(k)] = resource.MustParse(v)
	}
	return e.runPodWith(name, node, r)
}

func (e *env) runPodWith(name, node string, exactly resourcev1.ExactDeviceRequest) string {
	e.tb.Helper()
	return e.runPodRequest(name, node, resourcev1.DeviceRequest{Name: "gpu", Exactly: &exactly})
}

// runPodRequest is runPod with the claim template's one request as given.
func (e *env) runPodRequest(name, node string, request resourcev1.DeviceRequest) string {
	e.tb.Helper()
	class := ""
	if request.Exactly != nil {
		class = request.Exactly.DeviceClassName
	}
	_, err := e.client.ResourceV1().ResourceClaimTemplates(e.ns).Create(e.ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.LabelPackage: class}},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{request},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		e.tb.Fatal(err)
	}
	_, err = e.client.CoreV1().Pods(e.ns).Create(e.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(name)}},
			Containers: []corev1.Container{{
				Name: "app", Image: "ollama/ollama:0.24.0",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Claims:   []corev1.ResourceClaim{{Name: "gpu"}},
				},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.tb.Fatal(err)
	}
	var claim string
	err = wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := e.client.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				claim = *s.ResourceClaimName
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.tb.Fatalf("pod %s: no claim created: %v", name, err)
	}
	return claim
}

// placement waits until the claim is allocated and the pod bound (bound),
// or the pod is marked unschedulable (!bound); it returns the claim.
func (e *env) placement(pod, claim string, bound bool) (*resourcev1.ResourceClaim, string) {
	e.tb.Helper()
	var cl *resourcev1.ResourceClaim
	var reason string
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		po, err := e.client.CoreV1().Pods(e.ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cl, err = e.client.ResourceV1().ResourceClaims(e.ns).Get(ctx, claim, metav1.GetOptions{}); err != nil {
			return false, err
		}
		for _, c := range po.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				reason = c.Message
			}
		}
		if bound {
			return po.Spec.NodeName != "" && cl.Status.Allocation != nil && len(cl.Status.ReservedFor) > 0, nil
		}
		return reason != "", nil
	})
	if err != nil {
		e.tb.Fatalf("pod %s (want bound=%v): %v; scheduler says %q", pod, bound, err, reason)
	}
	return cl, reason
}

// allocated returns the device the claim got.
func allocated(cl *resourcev1.ResourceClaim) string {
	return cl.Status.Allocation.Devices.Results[0].Device
}
