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
			err := a.dryRun(ctx, admissionTenant, m.obj)
			if policyDenial(err) == "" {
				t.Fatalf("admitted or refused by something else than a gpuslice policy in tenant namespace %s: %v", admissionTenant, err)
			}
			if !strings.Contains(err.Error(), m.expect) {
				t.Fatalf("refused with the wrong message:\n got: %v\nwant: …%s…", err, m.expect)
			}
			refused++
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
		if err := a.dryRun(ctx, admissionTenant, m.obj); err != nil {
			t.Errorf("%s refused: %v", m.file, err)
		}
	}
}

// TestPolicyNamesAreStable pins the policy names the tests and the
// documentation refer to.
func TestPolicyNamesAreStable(t *testing.T) {
	for _, name := range []string{render.PolicyRawGPU, render.PolicySliceIsolation, render.PolicyReservedEnvKeys, render.PolicyClaimShape, render.PolicyClaimGrants, render.PolicyClaimWholeGPUs, render.PolicyClaimCapacity} {
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
				kind := o.Obj.GetKind()
				switch {
				case strings.HasPrefix(o.Address, "gpuslice_platform."), kind == "DeviceClass":
					// Cluster objects, installed by the admission stack.
				case kind == "Namespace", kind == "ResourceQuota", kind == "RoleBinding":
					// What a tenant namespace is made of: created for real.
					if err := a.create(ctx, a.client, o.Obj.GetNamespace(), o.Obj, false); err != nil && !apierrors.IsAlreadyExists(err) {
						t.Fatal(err)
					}
				case kind == "PyTorchJob", kind == "ScaledObject", kind == "TrainJob", kind == "TrainingRuntime":
					// Kinds of optional operators, not installed here, that
					// no policy matches; the pods an operator makes are
					// checked.
					checked = append(checked, madeByControllers(t, o.Obj)...)
				default:
					checked = append(checked, o.Obj)
					checked = append(checked, madeByControllers(t, o.Obj)...)
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
