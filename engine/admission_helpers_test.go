package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/plan"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// The admission tests apply testdata/admission/stack with the engine: a
// platform whose tenant label is admissionTenantLabel, so its policies bind
// only the namespaces of these tests in the control plane the package
// shares.
const (
	admissionTenantLabel = "admission-test.gpuslice.dev/tenant"
	admissionTenant      = "adm-tenant"
	admissionPlatform    = "adm-platform"
	// adminAccessLabel lets claims in a namespace ask for admin access;
	// the test namespaces carry it so that only the policy refuses it.
	adminAccessLabel = "resource.kubernetes.io/admin-access"
)

// admissionEnv is the state the admission tests share.
type admissionEnv struct {
	cfg    *rest.Config
	client dynamic.Interface
	mapper meta.RESTMapper
}

var (
	admissionOnce  sync.Once
	admissionSetup *admissionEnv
	admissionErr   error
)

// admission applies the admission stack once per test binary and waits
// until every policy is enforced.
func admission(tb testing.TB) *admissionEnv {
	tb.Helper()
	cl := clustertest.Shared(tb)
	admissionOnce.Do(func() {
		admissionSetup, admissionErr = setUpAdmission(tb, cl)
	})
	if admissionErr != nil {
		tb.Fatal(admissionErr)
	}
	return admissionSetup
}

func setUpAdmission(tb testing.TB, cl *cluster.Cluster) (*admissionEnv, error) {
	ctx := context.Background()
	e, err := engine.New(cl.RESTConfig(), "")
	if err != nil {
		return nil, err
	}
	defer e.Close()
	c, diags := hclstack.Load("testdata/admission/stack", hclstack.Options{Stack: "admission", VarOptions: hclstack.VarOptions{Env: []string{}}})
	if diags.HasErrors() {
		return nil, diags.Err()
	}
	p, err := e.Plan(ctx, c.Stack, plan.Options{})
	if err == nil && p.Diagnostics.HasErrors() {
		err = p.Diagnostics.Err()
	}
	if err == nil {
		err = e.Apply(ctx, p, apply.Options{})
	}
	if err != nil {
		return nil, fmt.Errorf("apply the admission stack: %w", err)
	}
	// The API server defaults fields of policies, bindings and roles; none
	// of that may show as a change.
	if p, err := e.Plan(ctx, c.Stack, plan.Options{}); err != nil || p.HasChanges() {
		return nil, fmt.Errorf("plan after applying the admission stack is not empty (err %v):\n%s", err, planText(p))
	}
	cfg := cl.RESTConfig()
	env := &admissionEnv{cfg: cfg, client: dynamic.NewForConfigOrDie(cfg),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))}
	for _, ns := range []string{admissionTenant, admissionPlatform, "kube-system"} {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, adminAccessLabel)
		if _, err := cl.Client().CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "admission-test"}); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	if err := env.waitEnforced(ctx, admissionTenant, "testdata/admission/hostile"); err != nil {
		return nil, err
	}
	tb.Logf("all %d policies enforced %s after the apply returned", len(render.PolicyNames), time.Since(start).Round(time.Millisecond))
	return env, nil
}

// waitEnforced waits until each policy refuses a manifest of the corpus it
// is known to refuse: policies (and a new namespace's params) take effect a
// moment after they are created.
func (a *admissionEnv) waitEnforced(ctx context.Context, namespace, dir string) error {
	probes := map[string]string{
		render.PolicyRawGPU:            "raw-gpu-pod.yaml",
		render.PolicySliceIsolation:    "privileged-pod.yaml",
		render.PolicyReservedEnvKeys:   "configmap-ld-preload-key.yaml",
		render.PolicyClaimShape:        "claim-selectors.yaml",
		render.PolicyClaimGrants:       "claim-class-granted-zero.yaml",
		render.PolicyClaimWholeGPUs:    "claim-count-two.yaml",
		render.PolicyClaimCapacity:     "claim-capacity-missing.yaml",
		render.PolicyExtendedResources: "pod-extended-fraction-two.yaml",
		render.PolicyExtendedGrants:    "pod-extended-over-grant-implicit.yaml",
	}
	if len(probes) != len(render.PolicyNames) {
		return fmt.Errorf("waitEnforced probes %d policies of %d; give each policy a manifest it refuses", len(probes), len(render.PolicyNames))
	}
	for policy, file := range probes {
		m, err := readManifest(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := a.dryRun(ctx, namespace, m.obj)
			if err != nil && strings.Contains(err.Error(), "'"+policy+"'") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("policy %s not enforced in %s after 30s: %s answered %v", policy, namespace, file, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// manifest is one test manifest and what its header comment expects.
type manifest struct {
	file   string
	expect string // "# expect: <text>": the refusal must contain it
	// as is the user the manifest is submitted as ("# as: <user>"):
	// impersonated, with the groups a user of that name has here. Empty:
	// the test's cluster admin.
	as  string
	obj *unstructured.Unstructured
}

func readManifest(path string) (manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return manifest{}, err
	}
	m := manifest{file: filepath.Base(path)}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if text, ok := strings.CutPrefix(sc.Text(), "# expect: "); ok {
			m.expect = text
		}
		if text, ok := strings.CutPrefix(sc.Text(), "# as: "); ok {
			m.as = text
		}
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return manifest{}, fmt.Errorf("%s: %w", path, err)
	}
	m.obj = &unstructured.Unstructured{Object: obj}
	return m, nil
}

func readCorpus(t *testing.T, dir string) []manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	sort.Strings(files)
	var out []manifest
	for _, f := range files {
		m, err := readManifest(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// dryRun creates a copy of obj in namespace with server-side dry run:
// admission runs in full and nothing is stored.
func (a *admissionEnv) dryRun(ctx context.Context, namespace string, obj *unstructured.Unstructured) error {
	return a.create(ctx, a.client, namespace, obj, true)
}

// dryRunAs is dryRun as the manifest's user (its "# as:" header), or as
// the cluster admin.
func (a *admissionEnv) dryRunAs(ctx context.Context, namespace string, m manifest) error {
	if m.as == "" {
		return a.dryRun(ctx, namespace, m.obj)
	}
	return a.create(ctx, a.clientAs(m.as), namespace, m.obj, true)
}

// clientAs impersonates user: kube-scheduler as it authenticates in the
// test's control plane (no groups but system:authenticated), anyone else
// as a tenant user.
func (a *admissionEnv) clientAs(user string) dynamic.Interface {
	cfg := rest.CopyConfig(a.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return dynamic.NewForConfigOrDie(cfg)
}

func (a *admissionEnv) create(ctx context.Context, client dynamic.Interface, namespace string, obj *unstructured.Unstructured, dryRun bool) error {
	o := obj.DeepCopy()
	gvk := o.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("map %s: %w", gvk, err)
	}
	opts := metav1.CreateOptions{FieldManager: "admission-test"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if mapping.Scope.Name() == meta.RESTScopeNameRoot {
		_, err = client.Resource(mapping.Resource).Create(ctx, o, opts)
		return err
	}
	o.SetNamespace(namespace)
	_, err = client.Resource(mapping.Resource).Namespace(namespace).Create(ctx, o, opts)
	return err
}

// policyDenial returns the gpuslice policy that refused a request, or "".
func policyDenial(err error) string {
	if err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		return ""
	}
	msg := err.Error()
	_, rest, ok := strings.Cut(msg, "ValidatingAdmissionPolicy 'gpuslice-")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "'")
	return "gpuslice-" + name
}

func roleBindingTo(user, clusterRole string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
