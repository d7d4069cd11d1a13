package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/engine/hclstack"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// TestHostileCorpusIsRefused submits every manifest of
// testdata/admission/hostile — one per way around the platform contract —
// to a tenant namespace and expects a gpuslice policy to refuse it with the
// message its header names. The same manifest is admitted in the
// platform's own namespace and in kube-system: the refusal is the policy's,
// and the policies leave non-tenant namespaces alone.
func TestHostileCorpusIsRefused(t *testing.T) {
	a := admission(t)
	ctx := context.Background()
	corpus := readCorpus(t, "testdata/admission/hostile")
	if len(corpus) < 30 {
		t.Fatalf("hostile corpus has %d manifests, want at least 30", len(corpus))
	}
	refused := 0
	for _, m := range corpus {
		t.Run(strings.TrimSuffix(m.file, ".yaml"), func(t *testing.T) {
			if m.expect == "" {
				t.Fatalf("%s has no '# expect: <message>' line", m.file)
			}
			err := a.dryRunAs(ctx, admissionTenant, m)
			if policyDenial(err) == "" {
				t.Fatalf("admitted or refused by something else than a gpuslice policy in tenant namespace %s (as %q): %v", admissionTenant, m.as, err)
			}
			if !strings.Contains(err.Error(), m.expect) {
				t.Fatalf("refused with the wrong message:\n got: %v\nwant: …%s…", err, m.expect)
			}
			refused++
			// As the admin: a tenant user may not create anything there.
			for _, ns := range []string{admissionPlatform, "kube-system"} {
				if err := a.dryRun(ctx, ns, m.obj); err != nil {
					t.Errorf("refused in non-tenant namespace %s: %v", ns, err)
				}
			}
		})
	}
	t.Logf("hostile corpus: %d of %d manifests refused with their own message", refused, len(corpus))
}

// TestHandWrittenGoodCorpusIsAdmitted submits the hand-written manifests
// of testdata/admission/good — claims in exactly the documented shape and
// pods with settings close to the forbidden ones — to a tenant namespace.
func TestHandWrittenGoodCorpusIsAdmitted(t *testing.T) {
	a := admission(t)
	ctx := context.Background()
	for _, m := range readCorpus(t, "testdata/admission/good") {
		if err := a.dryRunAs(ctx, admissionTenant, m); err != nil {
			t.Errorf("%s refused (as %q): %v", m.file, m.as, err)
		}
	}
}

// TestPolicyNamesAreStable pins the policy names the tests and the
// documentation refer to.
func TestPolicyNamesAreStable(t *testing.T) {
	for _, name := range render.PolicyNames {
		if !strings.HasPrefix(name, "gpuslice-") {
			t.Errorf("policy %s does not start with gpuslice-; policyDenial relies on it", name)
		}
	}
}

// TestRenderedConfigsAreAdmitted renders every configuration the engine
// is tested and documented with (engine/render/testdata/configs and any
// examples/**) into tenant namespaces of their own bound by the test
// policies, and expects every namespaced object admitted: claim templates,
// the claims the resourceclaim controller makes of them, workloads, the
// pods their controllers make, volumes, Services and preload Jobs.
func TestRenderedConfigsAreAdmitted(t *testing.T) {
	a := admission(t)
	ctx := context.Background()
	dirs, _ := filepath.Glob("render/testdata/configs/*")
	dirs = append(dirs, exampleDirs(t, "../examples")...)
	admitted := 0
	for _, dir := range dirs {
		name := strings.ReplaceAll(strings.Trim(strings.TrimPrefix(dir, "../"), "/"), "/", "-")
		t.Run(name, func(t *testing.T) {
			// The quickstart's one required variable, as `make demo` sets it.
			env := []string{"TF_VAR_node_plugin_image=registry.gpuslice.test/gpuslice/gpuslice-nodeplugin:test"}
			c, diags := hclstack.Load(dir, hclstack.Options{Stack: "good", VarOptions: hclstack.VarOptions{Env: env}})
			if diags.HasErrors() {
				t.Fatal(diags.Err())
			}
			s := c.Stack
			if s.Platform == nil {
				// Only for rendering: its objects are skipped below like any
				// platform's (the admission stack installs them).
				s.Platform = &spec.Platform{Meta: spec.Meta{Address: "gpuslice_platform.unused"}, Namespace: "unused", Fractions: spec.DefaultFractions}
			}
			s.Platform.TenantLabel = admissionTenantLabel
			rename := map[string]string{}
			for _, q := range s.Quotas {
				rename[q.Namespace] = "good-" + filepath.Base(dir) + "-" + q.Namespace
				q.Namespace = rename[q.Namespace]
			}
			for _, w := range s.Workloads {
				if n, ok := rename[w.Namespace]; ok {
					w.Namespace = n
				}
			}
			objs, err := render.Stack(s)
			if err != nil {
				t.Fatal(err)
			}
			var checked []*unstructured.Unstructured
			for _, o := range objs {
				kind := o.MustUnstructured().GetKind()
				switch {
				case strings.HasPrefix(o.Address, "gpuslice_platform."), kind == "DeviceClass":
					// Cluster objects, installed by the admission stack.
				case kind == "Namespace", kind == "ResourceQuota", kind == "RoleBinding":
					// What a tenant namespace is made of: created for real.
					if err := a.create(ctx, a.client, o.MustUnstructured().GetNamespace(), o.MustUnstructured(), false); err != nil && !apierrors.IsAlreadyExists(err) {
						t.Fatal(err)
					}
				case kind == "PyTorchJob", kind == "ScaledObject", kind == "TrainJob", kind == "TrainingRuntime":
					// Kinds of optional operators, not installed here, that
					// no policy matches; the pods an operator makes are
					// checked.
					checked = append(checked, madeByControllers(t, o.MustUnstructured())...)
				default:
					checked = append(checked, o.MustUnstructured())
					checked = append(checked, madeByControllers(t, o.MustUnstructured())...)
				}
			}
			// The grants policy reads each namespace's new quota through
			// an informer: wait until it sees it.
			for _, ns := range rename {
				if err := a.waitGranted(ctx, ns, checked); err != nil {
					t.Fatal(err)
				}
			}
			for _, o := range checked {
				err := a.dryRun(ctx, o.GetNamespace(), o)
				switch {
				case err == nil:
					admitted++
				case o.GetKind() == "Pod" && policyDenial(err) == "":
					// The namespace's quota, not a policy, refuses it (e.g. a
					// container without CPU requests under a CPU quota).
					t.Logf("pod of %s refused by something other than a policy: %v", o.GetLabels()["app.kubernetes.io/name"], err)
				default:
					t.Errorf("%s %s/%s refused: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
		})
	}
	t.Logf("rendered good corpus: %d objects admitted from %d configurations", admitted, len(dirs))
}

// madeByControllers returns what controllers create from a rendered object
// in a tenant namespace: the pod of a workload's template and the claim of
// a claim template.
func madeByControllers(t *testing.T, o *unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	switch o.GetKind() {
	case "ResourceClaimTemplate":
		meta, _, _ := unstructured.NestedMap(o.Object, "spec", "metadata")
		claimSpec, _, _ := unstructured.NestedMap(o.Object, "spec", "spec")
		claim := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
			"metadata": meta, "spec": claimSpec}}
		claim.SetNamespace(o.GetNamespace())
		claim.SetName(o.GetName() + "-claim")
		return []*unstructured.Unstructured{claim}
	case "Deployment", "StatefulSet", "Job":
		tmpl, _, _ := unstructured.NestedMap(o.Object, "spec", "template")
		return []*unstructured.Unstructured{podOf(o, tmpl, "pod")}
	case "PyTorchJob":
		// The Training Operator makes the pods of each replica type.
		var pods []*unstructured.Unstructured
		specs, _, _ := unstructured.NestedMap(o.Object, "spec", "pytorchReplicaSpecs")
		for _, typ := range slices.Sorted(maps.Keys(specs)) {
			tmpl, _, _ := unstructured.NestedMap(specs[typ].(map[string]any), "template")
			pods = append(pods, podOf(o, tmpl, strings.ToLower(typ)))
		}
		return pods
	case "TrainingRuntime":
		// Trainer, through a JobSet, makes the pods of each replicated
		// job's template (the TrainJob itself carries none).
		var pods []*unstructured.Unstructured
		jobs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "replicatedJobs")
		for _, j := range jobs {
			name, _, _ := unstructured.NestedString(j.(map[string]any), "name")
			tmpl, _, _ := unstructured.NestedMap(j.(map[string]any), "template", "spec", "template")
			pods = append(pods, podOf(o, tmpl, name))
		}
		return pods
	}
	return nil
}

// podOf is the pod a controller makes of o's pod template tmpl.
func podOf(o *unstructured.Unstructured, tmpl map[string]any, suffix string) *unstructured.Unstructured {
	pod := &unstructured.Unstructured{Object: tmpl}
	pod.SetAPIVersion("v1")
	pod.SetKind("Pod")
	pod.SetNamespace(o.GetNamespace())
	pod.SetName(o.GetName() + "-" + suffix)
	// The controller points the pod at the claim it made of the template.
	claims, _, _ := unstructured.NestedSlice(pod.Object, "spec", "resourceClaims")
	for _, c := range claims {
		m := c.(map[string]any)
		if tn, ok := m["resourceClaimTemplateName"].(string); ok {
			delete(m, "resourceClaimTemplateName")
			m["resourceClaimName"] = tn + "-claim"
		}
	}
	if len(claims) > 0 {
		unstructured.SetNestedSlice(pod.Object, claims, "spec", "resourceClaims")
	}
	// The StatefulSet controller adds a volume per claim template.
	vcts, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
	volumes, _, _ := unstructured.NestedSlice(pod.Object, "spec", "volumes")
	for _, v := range vcts {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "metadata", "name")
		volumes = append(volumes, map[string]any{"name": name, "persistentVolumeClaim": map[string]any{"claimName": name + "-" + o.GetName() + "-0"}})
	}
	if len(volumes) > 0 {
		unstructured.SetNestedSlice(pod.Object, volumes, "spec", "volumes")
	}
	return pod
}

// waitGranted waits until a claim template of objs in namespace is
// admitted: the grants policy then sees the namespace's quota.
func (a *admissionEnv) waitGranted(ctx context.Context, namespace string, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "ResourceClaimTemplate" || o.GetNamespace() != namespace {
			continue
		}
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if err = a.dryRun(ctx, namespace, o); err == nil {
				return nil
			}
		}
		return fmt.Errorf("claim template %s/%s still refused after 30s: %w", namespace, o.GetName(), err)
	}
	return nil
}

// exampleDirs lists the directories under root holding .tf files.
func exampleDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll
			}
			return err
		}
		if d.IsDir() && d.Name() == "modules" {
			return filepath.SkipDir // called by the examples, not applied on their own
		}
		if d.IsDir() && filepath.Dir(path) == filepath.Clean(root) && (d.Name() == "resources" || d.Name() == "data-sources" || d.Name() == "provider") {
			// tfplugindocs fragments, one per resource type and data source;
			// provider/examples_test.go applies them together with tofu.
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".tf") && !seen[filepath.Dir(path)] {
			seen[filepath.Dir(path)] = true
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestLargePodWithinCELCost submits pods with 60 init containers (every
// other one a sidecar) and 60 containers, each naming gpuslice extended
// resources, one of them asking for a slice: the extended-resource
// policies compare init containers pairwise, and must stay within the API
// server's CEL cost budget for pods far larger than real ones (a policy
// over budget refuses).
func TestLargePodWithinCELCost(t *testing.T) {
	a := admission(t)
	for _, names := range []int{1, 5} {
		var inits, containers []any
		for i := range 60 {
			res := map[string]any{"cpu": "10m", "memory": "10Mi", "gpuslice.dev/adm-l4-whole": "0"}
			for j := range names {
				res[fmt.Sprintf("deviceclass.resource.kubernetes.io/adm-l4-whole-%d", j)] = "0"
			}
			init := map[string]any{"name": fmt.Sprintf("init-%d", i), "image": "busybox:1.36", "resources": map[string]any{"requests": res, "limits": res}}
			if i%2 == 0 {
				init["restartPolicy"] = "Always"
			}
			inits = append(inits, init)
			containers = append(containers, map[string]any{"name": fmt.Sprintf("app-%d", i), "image": "busybox:1.36", "resources": map[string]any{"requests": res, "limits": res}})
		}
		gpu := map[string]any{"cpu": "10m", "memory": "10Mi", "gpuslice.dev/adm-l4": "1"}
		containers[0].(map[string]any)["resources"] = map[string]any{"requests": gpu, "limits": gpu}
		pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "large"},
			"spec": map[string]any{"initContainers": inits, "containers": containers}}}
		if err := a.dryRun(context.Background(), admissionTenant, pod); err != nil {
			t.Errorf("pod of 120 containers naming %d extended resources each refused: %v", names+1, err)
		}
	}
}
