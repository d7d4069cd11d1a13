package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/testenv"
	"github.com/gpuslice/gpuslice/schemas/tables"
)

// On the tester's cluster (KUBE_CONFIG_PATH) the tests that need GPU
// slices get them from a node plugin: the one already there when the
// tester says so, else one the suite installs with a platform of its own
// and removes afterwards. The tester names what it needs in the variables
// the quickstart reads (`gpuslice dev env` prints them for a dev cluster).
const (
	// envPlatform = "existing": test with the platform and node plugin
	// already on the cluster instead of installing them.
	envPlatform = "GPUSLICE_TEST_PLATFORM"
	// envPluginImage is the node plugin's image the suite installs, as
	// `make image-push` printed it.
	envPluginImage = "TF_VAR_node_plugin_image"
	// envSliceCheck is the slice-check image (internal/images) the nodes
	// can pull: the workload test runs it on a slice.
	envSliceCheck = "GPUSLICE_TEST_SLICE_CHECK_IMAGE"

	// suiteNamespace holds the platform the suite installs (the engine
	// reads the first platform by namespace: the platform tests' acc-*
	// ones come first while they run); suiteInventory its stack's record.
	suiteNamespace = "gpuslice-acc"
	suiteInventory = "gpuslice-acc-inventory"
	suiteStack     = "gpuslice-acc-platform"
)

// suitePlatformHCL is the platform the suite installs: the node plugin
// with the quickstart's variables, no admission policies (the tests create
// objects of their own in tenant namespaces, as on the local cluster).
const suitePlatformHCL = `
variable "node_plugin_image" { type = string }
variable "driver_root" {
  type    = string
  default = "/"
}
variable "simulated_gpus" {
  type    = string
  default = null
}
variable "node_plugin_env" {
  type    = map(string)
  default = null
}

resource "gpuslice_platform" "acc" {
  namespace          = "` + suiteNamespace + `"
  admission_policies = false
  node_plugin {
    image          = var.node_plugin_image
    driver_root    = var.driver_root
    simulated_gpus = var.simulated_gpus
    env            = var.node_plugin_env
  }
}
`

var (
	restConfig *rest.Config
	// sliceModel is the GPU model the workload tests ask slices of: the
	// local cluster's simulated V100, or the model the tester's node
	// plugin publishes 25 % slices of.
	sliceModel = "Tesla V100-PCIE-32GB"
	// suiteInstalled is true while the suite's platform is on the
	// tester's cluster.
	suiteInstalled bool
)

// namespacesBefore are the tester's cluster's namespaces before the run:
// the clean-up deletes only namespaces the tests made.
var namespacesBefore = map[string]bool{}

func existingPlatform() bool { return os.Getenv(envPlatform) == "existing" }

// checkForeignPlatform refuses a tester's cluster that has a gpuslice
// platform the tester did not offer: the suite would install a second one
// beside it.
func checkForeignPlatform(ctx context.Context) error {
	nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		namespacesBefore[ns.Name] = true
	}
	if existingPlatform() {
		return nil
	}
	if v := os.Getenv(envPlatform); v != "" {
		return fmt.Errorf("%s=%q: the only value is \"existing\" (test with the platform already on the cluster); unset, the suite installs its own", envPlatform, v)
	}
	cms, err := kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + render.PlatformConfigMap})
	if err != nil {
		return fmt.Errorf("look for a gpuslice platform: %w", err)
	}
	for _, cm := range cms.Items {
		if cm.Namespace != suiteNamespace {
			return fmt.Errorf("the cluster already has a gpuslice platform (ConfigMap %s/%s): set %s=existing to run the tests with it, or use a cluster without gpuslice, where the suite installs and removes its own",
				cm.Namespace, cm.Name, envPlatform)
		}
	}
	return nil
}

// needSlices stops t unless the cluster publishes GPU slices: always on
// the local control plane; on the tester's cluster from the node plugin
// already there or the one the suite installs now.
func needSlices(t *testing.T) {
	t.Helper()
	needCluster(t)
	if !own {
		return
	}
	if !existingPlatform() && !suiteInstalled {
		if os.Getenv(envPluginImage) == "" {
			testenv.Unavailable(t, "no node plugin publishes GPU slices for this test on the cluster at KUBE_CONFIG_PATH: set %s to the node plugin's image (`make image-push IMAGE=…` prints it; `gpuslice dev env` for a dev cluster, with its other TF_VAR_ lines) for the suite to install it, or %s=existing to use the one installed",
				envPluginImage, envPlatform)
		}
		if err := installSuitePlatform(context.Background()); err != nil {
			t.Fatalf("install the suite's platform with the node plugin: %v", err)
		}
	}
	model, err := publishedModel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if model == "" {
		testenv.Unavailable(t, "no node of the cluster at KUBE_CONFIG_PATH publishes a 25 %% slice of %s's GPUs: give the node plugin GPU nodes (it runs on nodes labelled nvidia.com/gpu.present=true)", contract.DriverName)
	}
	sliceModel = model
}

// withoutSuitePlatform gives t a cluster without gpuslice's platform: a
// test of the platform itself installs objects (the tenant ClusterRole,
// the node plugin's RBAC) that exist once per cluster. The suite's
// platform comes back when a later test needs slices.
func withoutSuitePlatform(t *testing.T) {
	t.Helper()
	needCluster(t)
	if !own {
		return
	}
	if existingPlatform() {
		testenv.Unavailable(t, "installs and removes a platform of its own, and the one on the cluster (%s=existing) owns gpuslice's cluster-wide objects: run it on a cluster without gpuslice, where the suite installs its own", envPlatform)
	}
	if suiteInstalled {
		if err := removeSuitePlatform(context.Background()); err != nil {
			t.Fatalf("remove the suite's platform for this test: %v", err)
		}
	}
}

// publishedModel is the model of the first GPU (by node and name) with a
// 25 % slice published, or "".
func publishedModel(ctx context.Context) (string, error) {
	list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + contract.DriverName})
	if err != nil {
		return "", fmt.Errorf("list the ResourceSlices of %s: %w", contract.DriverName, err)
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	for _, s := range items {
		for _, d := range s.Spec.Devices {
			f, m := d.Attributes[contract.AttrFraction], d.Attributes[contract.AttrModel]
			if f.IntValue != nil && *f.IntValue == 25 && m.StringValue != nil {
				return *m.StringValue, nil
			}
		}
	}
	return "", nil
}

// sliceNodes are the nodes publishing slices of sliceModel.
func sliceNodes(ctx context.Context) ([]string, error) {
	list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + contract.DriverName})
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, s := range list.Items {
		for _, d := range s.Spec.Devices {
			if m := d.Attributes[contract.AttrModel]; m.StringValue != nil && *m.StringValue == sliceModel && s.Spec.NodeName != nil && !slices.Contains(nodes, *s.Spec.NodeName) {
				nodes = append(nodes, *s.Spec.NodeName)
			}
		}
	}
	sort.Strings(nodes)
	return nodes, nil
}

// suiteEngine is an engine keeping the suite's stack record in its own
// namespace, with the stack's configuration loaded.
func suiteEngine() (*engine.Engine, *hclstack.Config, error) {
	set, err := tables.Load()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "gpuslice-acc-platform-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(suitePlatformHCL), 0o644); err != nil {
		return nil, nil, err
	}
	// The variables come from TF_VAR_* in the environment.
	c, diags := hclstack.Load(dir, hclstack.Options{Stack: suiteStack, GPUModels: set.GPUModels})
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("the suite's platform (from the TF_VAR_ variables): %w", diags.Err())
	}
	e, err := engine.New(restConfig, suiteInventory)
	if err != nil {
		return nil, nil, err
	}
	e.Tables = set
	return e, c, nil
}

// installSuitePlatform applies the suite's platform and waits until its
// node plugin runs on every node it selects and each publishes slices.
func installSuitePlatform(ctx context.Context) error {
	e, c, err := suiteEngine()
	if err != nil {
		return err
	}
	defer e.Close()
	p, err := e.Plan(ctx, c.Stack, plan.Options{})
	if err != nil {
		return err
	}
	if p.Diagnostics.HasErrors() {
		return fmt.Errorf("plan: %w", p.Diagnostics.Err())
	}
	suiteInstalled = true // from the first write on: removed at the end whatever happens
	if err := e.Apply(ctx, p, apply.Options{}); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	var why string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		why = pluginNotReady(ctx)
		return why == "", nil
	})
	if err != nil {
		return fmt.Errorf("the node plugin in %s is not publishing after 3 minutes: %s", suiteNamespace, why)
	}
	return nil
}

// pluginNotReady says what the suite's node plugin still lacks, or "".
func pluginNotReady(ctx context.Context) string {
	ds, err := kube.AppsV1().DaemonSets(suiteNamespace).Get(ctx, render.NodePluginDaemonSet, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	st := ds.Status
	if st.DesiredNumberScheduled == 0 {
		return "its DaemonSet selects no node (it runs on nodes labelled nvidia.com/gpu.present=true)"
	}
	if st.NumberReady < st.DesiredNumberScheduled || st.UpdatedNumberScheduled < st.DesiredNumberScheduled {
		return fmt.Sprintf("%d of %d pods ready (kubectl -n %s describe pods)", st.NumberReady, st.DesiredNumberScheduled, suiteNamespace)
	}
	pods, err := kube.CoreV1().Pods(suiteNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + contract.DriverName})
	if err != nil {
		return err.Error()
	}
	publishing := map[string]bool{}
	for _, s := range list.Items {
		if s.Spec.NodeName != nil && len(s.Spec.Devices) > 0 {
			publishing[*s.Spec.NodeName] = true
		}
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != "" && !publishing[pod.Spec.NodeName] {
			return "no slices published for node " + pod.Spec.NodeName
		}
	}
	return ""
}

// removeSuitePlatform destroys the suite's platform and waits until its
// namespace and node plugin pods are gone, so another platform can follow.
func removeSuitePlatform(ctx context.Context) error {
	e, _, err := suiteEngine()
	if err != nil {
		return err
	}
	defer e.Close()
	p, err := e.PlanDestroy(ctx, suiteStack)
	if err != nil {
		return err
	}
	if p.Diagnostics.HasErrors() {
		return fmt.Errorf("plan the removal: %w", p.Diagnostics.Err())
	}
	if err := e.Destroy(ctx, p, apply.Options{}); err != nil {
		return err
	}
	suiteInstalled = false
	// A platform's destroy leaves its namespace (it is released, like a
	// tenant's): the suite's is its own.
	if err := kube.CoreV1().Namespaces().Delete(ctx, suiteNamespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", suiteNamespace, err)
	}
	var left string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, suiteNamespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		left = fmt.Sprintf("namespace %s still there (%v)", suiteNamespace, err)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("after removing the suite's platform: %s", left)
	}
	return nil
}

// cleanUpTesterCluster removes what the suite installed on the tester's
// cluster, saying what it could not.
func cleanUpTesterCluster() error {
	ctx := context.Background()
	var errs []string
	if suiteInstalled {
		if err := removeSuitePlatform(ctx); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// The namespaces the tests made: tenants' (acc-*) and those of the
	// platforms they applied are released by destroy, not deleted.
	list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, err.Error())
	} else {
		for _, ns := range list.Items {
			if namespacesBefore[ns.Name] || !(strings.HasPrefix(ns.Name, "acc-") || strings.HasPrefix(ns.Name, "gpuslice-")) {
				continue
			}
			if err := kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Sprintf("delete namespace %s: %v", ns.Name, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("clean-up of the cluster at KUBE_CONFIG_PATH: %s", strings.Join(errs, "; "))
	}
	return nil
}

// forceDeletePodsOn removes the pods bound to a node without a kubelet,
// which would otherwise never finish terminating.
func forceDeletePodsOn(ctx context.Context, node string) {
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		_ = kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
}

// simulatedNode registers a node without a kubelet for simulated GPUs: on
// the local control plane one of its nodes; on the tester's cluster one
// with its lease renewed while t runs, removed afterwards with its pods
// (they never finish terminating without a kubelet) and slices.
func simulatedNode(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if !own {
		if _, err := testCluster.AddNode(ctx, cluster.NodeSpec{Name: name}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := cluster.RegisterNode(ctx, kube, cluster.NodeSpec{Name: name}); err != nil {
		t.Fatal(err)
	}
	beat, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(10 * time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-beat.Done():
				return
			case <-ticker.C:
				_ = cluster.RenewLease(beat, kube, name)
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		forceDeletePodsOn(ctx, name)
		_ = kube.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		_ = kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
		if err := kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("remove the simulated node %s: %v", name, err)
		}
	})
}
