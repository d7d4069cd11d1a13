// Package deploy_test checks the Helm chart and the plain manifests: the
// chart renders (with the template functions it uses) to exactly the plain
// manifests, every object decodes strictly, the API server accepts them
// (server-side dry run, which also compiles the admission policy's CEL),
// and the DaemonSet passes only flags the plugin has, with every host
// directory mounted at the same path.
package deploy_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/deploy"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

var update = flag.Bool("update", false, "rewrite manifests/gpuslice-nodeplugin.yaml from the chart")

const (
	chartDir  = "helm/gpuslice-nodeplugin"
	manifests = "manifests/gpuslice-nodeplugin.yaml"
	namespace = "gpuslice-system"
)

// render renders the chart with its default values through Helm's own
// template engine (helm.sh/helm/v4), as `helm template` does.
func render(t *testing.T) string {
	t.Helper()
	return renderWith(t, nil)
}

func renderWith(t *testing.T, overrides map[string]any) string {
	t.Helper()
	out, err := deploy.RenderManifests(namespace, overrides)
	if err != nil {
		t.Fatal(err)
	}
	return "# Generated from helm/gpuslice-nodeplugin with its default values (namespace " + namespace + ").\n" +
		"# Regenerate: go test ./deploy -run TestChartMatchesManifests -update\n" + out
}

func TestChartMatchesManifests(t *testing.T) {
	rendered := render(t)
	if *update {
		if err := os.WriteFile(manifests, []byte(rendered), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(manifests)
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != rendered {
		t.Fatalf("%s differs from the rendered chart: run go test ./deploy -run TestChartMatchesManifests -update", manifests)
	}
}

// objects decodes the plain manifests strictly: an unknown or misspelt
// field is an error.
func objects(t *testing.T) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(manifests)
	if err != nil {
		t.Fatal(err)
	}
	out, err := deploy.Decode(string(data))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestManifestContent(t *testing.T) {
	var ds *appsv1.DaemonSet
	var role *rbacv1.ClusterRole
	kinds := map[string]bool{}
	for _, o := range objects(t) {
		kinds[o.GetObjectKind().GroupVersionKind().Kind] = true
		switch v := o.(type) {
		case *appsv1.DaemonSet:
			ds = v
		case *rbacv1.ClusterRole:
			role = v
		}
	}
	for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if !kinds[k] {
			t.Errorf("manifests lack a %s", k)
		}
	}
	if ds == nil || role == nil {
		t.FailNow()
	}
	// The plugin's writes: ResourceSlices, and the Events it records on its
	// Node (created, never changed); claims are read, and device classes
	// watched (prepare checks each allocation against its package).
	readsClasses := false
	for _, r := range role.Rules {
		if slices.Equal(r.APIGroups, []string{"resource.k8s.io"}) && slices.Contains(r.Resources, "deviceclasses") {
			readsClasses = slices.Equal(r.Verbs, []string{"get", "list", "watch"})
		}
		for _, res := range r.Resources {
			writes := slices.ContainsFunc(r.Verbs, func(v string) bool { return v == "create" || v == "delete" || v == "*" })
			event := res == "events" && slices.Equal(r.APIGroups, []string{"events.k8s.io"}) && slices.Equal(r.Verbs, []string{"create"})
			if writes && res != "resourceslices" && !event {
				t.Errorf("role may %v %s: only ResourceSlices are the plugin's to create or delete, and Events to create", r.Verbs, res)
			}
			if res == "resourceclaims/driver" && (!slices.Equal(r.ResourceNames, []string{"gpuslice.dev"}) || !slices.Contains(r.Verbs, "associated-node:update")) {
				t.Errorf("resourceclaims/driver rule %+v: want associated-node verbs for gpuslice.dev only", r)
			}
		}
	}
	if !readsClasses {
		t.Error("role may not get, list and watch deviceclasses: prepare reads each claim's package")
	}

	// Every flag is one the plugin has, and every host directory it names
	// is mounted at the same path (CDI specs carry host paths).
	help, err := exec.Command("go", "run", "../cmd/gpuslice-nodeplugin", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("gpuslice-nodeplugin --help: %v\n%s", err, help)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	hostPaths := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	for name, mount := range mounts {
		if name != "driver-root" && name != "toolkit-config" && hostPaths[name] != mount {
			t.Errorf("volume %s: host path %s mounted at %s; must be the same path", name, hostPaths[name], mount)
		}
	}
	samePath := map[string]bool{"--plugin-dir": true, "--registrar-dir": true, "--cdi-dir": true, "--state-dir": true, "--shim-dir": true, "--accounting-dir": true}
	for _, a := range c.Args {
		name, value, _ := strings.Cut(a, "=")
		if !strings.Contains(string(help), "  "+name+" ") {
			t.Errorf("DaemonSet passes %s, which gpuslice-nodeplugin does not have", name)
		}
		if samePath[name] && !underMount(value, mounts) {
			t.Errorf("%s=%s is not inside any mounted host directory", name, value)
		}
	}
	if !ds.Spec.Template.Spec.HostPID {
		t.Error("the plugin needs the host PID namespace to map NVML's processes to pods")
	}
	if c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME must come from spec.nodeName: %+v", c.Env)
	}
}

func underMount(path string, mounts map[string]string) bool {
	for _, m := range mounts {
		if path == m || strings.HasPrefix(path, m+"/") {
			return true
		}
	}
	return false
}

// TestAPIServerAccepts submits every object as a server-side dry run.
func TestAPIServerAccepts(t *testing.T) {
	c := clustertest.Start(t, cluster.Options{})
	ctx := context.Background()
	client := c.Client()
	if _, err := cluster.CreateNamespace(ctx, client, namespace, nil); err != nil {
		t.Fatal(err)
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, o := range objects(t) {
		var err error
		switch v := o.(type) {
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, dry)
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, v, dry)
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, v, dry)
		case *appsv1.DaemonSet:
			_, err = client.AppsV1().DaemonSets(v.Namespace).Create(ctx, v, dry)
		case *admissionv1.ValidatingAdmissionPolicy:
			var p *admissionv1.ValidatingAdmissionPolicy
			p, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, v, dry)
			if err == nil && p.Status.TypeChecking != nil && len(p.Status.TypeChecking.ExpressionWarnings) > 0 {
				t.Errorf("admission policy CEL warnings: %+v", p.Status.TypeChecking.ExpressionWarnings)
			}
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, v, dry)
		default:
			t.Errorf("no dry run for %T", o)
		}
		if err != nil {
			t.Errorf("%T: %v", o, err)
		}
	}
}

// The image is pulled by tag and digest once the digest is set; without a
// toolkit configuration the check is off and nothing of the host's /etc is
// mounted.
func TestChartValues(t *testing.T) {
	digest := "sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"
	out := renderWith(t, map[string]any{"image": map[string]any{"repository": "registry.test/gpuslice/gpuslice-nodeplugin", "digest": digest}, "toolkitConfig": ""})
	if want := `image: "registry.test/gpuslice/gpuslice-nodeplugin:0.1.0@` + digest + `"`; !strings.Contains(out, want) {
		t.Errorf("rendered chart lacks %s", want)
	}
	if strings.Contains(out, "toolkit-config:") || strings.Contains(out, "/host/etc") || !strings.Contains(out, "--toolkit-config=\n") {
		t.Errorf("toolkitConfig empty: want --toolkit-config= (check off) and no host mount:\n%s", out)
	}
}
