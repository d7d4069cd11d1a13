package redteam

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/images"
	"github.com/gpuslice/gpuslice/internal/realnode"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// The tenants: red attacks, blue is the victim whose slice shares the GPU.
const (
	partitionNode, sharedNode = "red-node", "shared-node"
	red, blue                 = "red", "blue"
	alice, bob                = "alice", "bob" // red's and blue's users
	open                      = "red-open"     // a namespace the admission policies do not bind: admission switched off
	victimHold                = 12000          // MiB the victim holds of its 16 GiB slice
	sliceMiB                  = 8192           // red's 8 GiB partition
	pkgQuarter                = "red-8gi"      // 25 %, also requested as gpuslice.dev/red-8gi
	pkgAnySize                = "red-6gi"      // any size: 6 GiB, 20 % compute
	pkgShared                 = "red-ts"       // time-sliced, 4 per GPU
	pkgVictim                 = "blue-16gi"    // 50 %, blue's only
	pkgMIG                    = "red-mig-1g"   // an A100 1g.5gb instance (no node has one: admission only)
	extQuarter                = "gpuslice.dev/red-8gi"
	implicitExt               = "deviceclass.resource.kubernetes.io/"
)

// stack is what the platform team applies: the platform with its admission
// policies, a package of each kind, red's quota (alice) and blue's (bob),
// and blue's workload holding most of its slice.
const stack = `
resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "quarter" {
  name                   = "` + pkgQuarter + `"
  gpu_model              = "Tesla V100-PCIE-32GB"
  fraction               = 25
  extended_resource_name = "` + extQuarter + `"
}

resource "gpuslice_package" "any" {
  name          = "` + pkgAnySize + `"
  gpu_model     = "Tesla V100-PCIE-32GB"
  memory        = "6Gi"
  compute_share = 20
}

resource "gpuslice_package" "shared" {
  name      = "` + pkgShared + `"
  gpu_model = "Tesla V100-PCIE-32GB"
  sharing   = "time-sliced"
  replicas  = 4
}

resource "gpuslice_package" "mig" {
  name        = "` + pkgMIG + `"
  gpu_model   = "NVIDIA A100-SXM4-40GB"
  mig_profile = "1g.5gb"
}

resource "gpuslice_package" "victim" {
  name      = "` + pkgVictim + `"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 50
}

resource "gpuslice_quota" "red" {
  namespace       = "` + red + `"
  slices          = { (gpuslice_package.quarter.name) = 2, (gpuslice_package.any.name) = 1, (gpuslice_package.shared.name) = 1, (gpuslice_package.mig.name) = 2 }
  cpu_requests    = "4"
  memory_requests = "4Gi"
  tenant_users    = ["` + alice + `"]
}

resource "gpuslice_quota" "blue" {
  namespace       = "` + blue + `"
  slices          = { (gpuslice_package.victim.name) = 1 }
  cpu_requests    = "1"
  memory_requests = "1Gi"
  tenant_users    = ["` + bob + `"]
}

resource "gpuslice_workload" "victim" {
  namespace = gpuslice_quota.blue.namespace
  name      = "victim"
  package   = gpuslice_package.victim.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = "` + images.SliceCheck + `"
    args           = ["--hold", "` + "12000" + `", "--sleep"]
    cpu_request    = "100m"
    memory_request = "64Mi"
  }
}
`

// suite is the shared state of every attack.
type suite struct {
	env   *realnodetest.Env
	admin kubernetes.Interface
	// alice is red's tenant user: what she may do is what RBAC and the
	// admission policies let her.
	alice kubernetes.Interface
	// victim is blue's workload, holding most of its slice beside red's.
	victim *holder
}

var (
	once     sync.Once
	shared   *suite
	setupErr error
)

// setup applies the stack once and waits for the victim to hold its memory.
func setup(t *testing.T) *suite {
	t.Helper()
	env := realnodetest.Shared(t)
	once.Do(func() { shared, setupErr = newSuite(env) })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return shared
}

func newSuite(env *realnodetest.Env) (*suite, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "redteam-stack-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(stack), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(gpusliceCLI, "apply", dir, "-stack", "redteam", "-auto-approve")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.KubeconfigPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("apply the red-team stack: %v\n%s", err, out)
	}
	s := &suite{env: env, admin: env.Cluster.Client()}
	cfg := rest.CopyConfig(env.Cluster.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: alice, Groups: []string{"system:authenticated"}}
	if s.alice, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if _, err := s.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: open}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	var name string
	err = waitFor(3*time.Minute, "blue's victim pod", func() (bool, string) {
		pods, err := s.admin.CoreV1().Pods(blue).List(ctx, metav1.ListOptions{LabelSelector: "job-name=victim"})
		if err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprint(err)
		}
		name = pods.Items[0].Name
		return true, ""
	})
	if err != nil {
		return nil, err
	}
	if s.victim, err = s.holding(blue, name, victimHold); err != nil {
		return nil, err
	}
	return s, nil
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, what string, cond func() (bool, string)) error {
	var last string
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s; last: %s", what, timeout, last)
		}
	}
}

// nvmlUsed is the plugin's metric of a claim's GPU memory as NVML sees it.
const nvmlUsed = "gpuslice_claim_nvml_memory_used_bytes"

// holder is a pod holding GPU memory of its claim: blue's victim, or the
// neighbour of an attack. An attack must leave it as it was.
type holder struct {
	ns, pod  string
	claimUID string
	node     *realnode.Node
	// memory is its claim's GPU memory as NVML shows it, through the node
	// plugin's metrics.
	memory float64
}

// holding waits until pod (running slice-check --hold mib) holds its
// memory, and the node plugin sees it, and returns it as a holder.
func (s *suite) holding(ns, pod string, mib int) (*holder, error) {
	ctx := context.Background()
	h := &holder{ns: ns, pod: pod}
	err := waitFor(3*time.Minute, "pod "+ns+"/"+pod+" to hold its memory", func() (bool, string) {
		logs, err := s.admin.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(logs), fmt.Sprintf("holding %d MiB", mib)) {
			return false, fmt.Sprint(string(logs), err)
		}
		p, err := s.admin.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || claimOf(p) == "" {
			return false, fmt.Sprint("its claim: ", err)
		}
		claim, err := s.admin.ResourceV1().ResourceClaims(ns).Get(ctx, claimOf(p), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		h.claimUID, h.node = string(claim.UID), s.env.Node(p.Spec.NodeName)
		if h.node == nil {
			return false, "on node " + p.Spec.NodeName
		}
		metrics, err := realnodetest.ReadMetrics(h.node)
		h.memory = realnodetest.ClaimMetric(metrics, nvmlUsed, h.claimUID)
		return h.memory >= float64(mib)*(1<<20), fmt.Sprintf("NVML shows %v bytes (%v)", h.memory, err)
	})
	return h, err
}

// claimOf is the name of the pod's (first) claim: named in its spec, made
// from its template, or made by the scheduler for its extended resources;
// "" until it is made.
func claimOf(p *corev1.Pod) string {
	for _, c := range p.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			return *c.ResourceClaimName
		}
	}
	for _, c := range p.Status.ResourceClaimStatuses {
		if c.ResourceClaimName != nil {
			return *c.ResourceClaimName
		}
	}
	if e := p.Status.ExtendedResourceClaimStatus; e != nil {
		return e.ResourceClaimName // the scheduler's, for extended resources
	}
	return ""
}

// untouched fails t unless h still runs, never restarted, and holds the
// GPU memory it held: an attack must not reach another claim.
func (s *suite) untouched(t *testing.T, h *holder) {
	t.Helper()
	p, err := s.admin.CoreV1().Pods(h.ns).Get(context.Background(), h.pod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s/%s: %v", h.ns, h.pod, err)
	}
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 0 ||
		p.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("%s/%s is no longer running as it was: phase %s, %+v", h.ns, h.pod, p.Status.Phase, p.Status.ContainerStatuses)
	}
	if now := realnodetest.ClaimMetric(realnodetest.Scrape(t, h.node), nvmlUsed, h.claimUID); now != h.memory {
		t.Fatalf("the GPU memory of %s/%s went from %v to %v bytes", h.ns, h.pod, h.memory, now)
	}
}

// victimUntouched: an attack on red's slice must not reach blue's.
func (s *suite) victimUntouched(t *testing.T) {
	t.Helper()
	s.untouched(t, s.victim)
}

// claimTemplate is a claim template in the documented shape for pkg, with
// the capacity the package's slices take.
func claimTemplate(name, pkg string, capacity map[resourcev1.QualifiedName]resource.Quantity) *resourcev1.ResourceClaimTemplate {
	req := resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: pkg, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}
	if capacity != nil {
		req.Exactly.Capacity = &resourcev1.CapacityRequirements{Requests: capacity}
	}
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.LabelPackage: pkg}},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{contract.LabelPackage: pkg}},
			Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}},
		},
	}
}

// attackPod is a pod running script in the slice-check image (which has
// slice-attack beside slice-check) on the partition node, beside blue's
// victim, with the claim of template when it is not empty, and an emptyDir
// at /tmp (the image has none).
func attackPod(name, template, script string) *corev1.Pod {
	c := corev1.Container{
		Name: "attack", Image: images.SliceCheck, Command: []string{"sh", "-c", script},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
		VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			NodeSelector: map[string]string{corev1.LabelHostname: partitionNode},
			Volumes:      []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if template != "" {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}}
		c.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}
	pod.Spec.Containers = []corev1.Container{c}
	return pod
}

// result is how an attack's pod ended.
type result struct {
	pod      string
	claimUID string // its claim, if it had one
	logs     string // of its first container
	exit     int32
}

// runAsTenant creates template (if any) and pod as alice in red, waits
// for the pod's first container to end, and returns how it ended. The pod
// and template are deleted when t ends, and their claim's slice freed.
func (s *suite) runAsTenant(t *testing.T, tmpl *resourcev1.ResourceClaimTemplate, pod *corev1.Pod) result {
	t.Helper()
	client, ns := s.alice, red
	t.Helper()
	ctx := context.Background()
	if tmpl != nil {
		if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create claim template %s/%s: %v", ns, tmpl.Name, err)
		}
		t.Cleanup(func() {
			_ = s.admin.ResourceV1().ResourceClaimTemplates(ns).Delete(context.Background(), tmpl.Name, metav1.DeleteOptions{})
		})
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, pod.Name, err)
	}
	t.Cleanup(func() { s.deletePod(t, ns, pod.Name) })
	r := result{pod: pod.Name}
	realnodetest.Eventually(t, 3*time.Minute, "pod "+ns+"/"+pod.Name+" to end", func() (bool, string) {
		p, err := s.admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == pod.Spec.Containers[0].Name && c.State.Terminated != nil {
				r.exit = c.State.Terminated.ExitCode
				if name := claimOf(p); name != "" {
					if claim, err := s.admin.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
						r.claimUID = string(claim.UID)
					}
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, conditions %+v, containers %+v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	})
	logs, err := client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: pod.Spec.Containers[0].Name}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", ns, pod.Name, err)
	}
	r.logs = string(logs)
	return r
}

// deletePod deletes a pod and waits until its claims are gone, so the next
// attack finds the slice free.
func (s *suite) deletePod(t *testing.T, ns, name string) {
	ctx := context.Background()
	p, err := s.admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	_ = s.admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	var claims []string
	for _, c := range p.Status.ResourceClaimStatuses {
		if c.ResourceClaimName != nil {
			claims = append(claims, *c.ResourceClaimName)
		}
	}
	realnodetest.Eventually(t, 2*time.Minute, "pod "+ns+"/"+name+" and its claims to go", func() (bool, string) {
		if _, err := s.admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, "pod still there"
		}
		for _, c := range claims {
			if _, err := s.admin.ResourceV1().ResourceClaims(ns).Get(ctx, c, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, "claim " + c + " still there"
			}
		}
		return true, ""
	})
}

// policyRefusal fails t unless err is a gpuslice admission policy's
// refusal whose message holds want; it returns the message.
func policyRefusal(t *testing.T, err error, want string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want a gpuslice policy's refusal saying %q", want)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "gpuslice-") {
		t.Fatalf("refused by something other than a gpuslice policy: %v", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("refused with the wrong reason:\n got: %v\nwant: …%s…", err, want)
	}
	return policyAndReason(err.Error())
}

var denial = regexp.MustCompile(`ValidatingAdmissionPolicy '([^']+)' .* denied request: (.*)$`)

// policyAndReason shortens the API server's refusal to the policy's name
// and the reason the tenant reads.
func policyAndReason(msg string) string {
	if m := denial.FindStringSubmatch(msg); m != nil {
		return m[1] + ": " + m[2]
	}
	return msg
}
