package deploy_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/deploy"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

var reconcileValues = map[string]any{"reconcile": map[string]any{
	"enabled": true, "gitURL": "https://git.example.com/platform/gpu-stacks.git", "path": "stacks/prod", "stack": "prod",
}}

// The chart's reconcile Deployment runs gpuslice reconcile from the
// repository, non-root with a read-only root (its clone on an emptyDir),
// as a ServiceAccount bound to the runner's ClusterRole and, in the
// inventory namespace, to a ClusterRole for its status ConfigMap and Events; the API server accepts every object.
func TestReconcileDeployment(t *testing.T) {
	out, err := deploy.RenderManifests(namespace, reconcileValues)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	var reconcileObjs []runtime.Object
	var d *appsv1.Deployment
	for _, o := range objs {
		m, _ := o.(metav1.Object)
		if m == nil || !strings.HasPrefix(m.GetName(), "gpuslice-reconcile-") {
			continue
		}
		reconcileObjs = append(reconcileObjs, o)
		switch v := o.(type) {
		case *appsv1.Deployment:
			d = v
		case *rbacv1.ClusterRoleBinding:
			if v.RoleRef.Name != contract.RunnerRole {
				t.Errorf("ClusterRoleBinding %s binds %s, want the runner's role %s", v.Name, v.RoleRef.Name, contract.RunnerRole)
			}
		}
	}
	if d == nil || len(reconcileObjs) != 5 {
		t.Fatalf("want a ServiceAccount, ClusterRoleBinding, ClusterRole, RoleBinding and Deployment named gpuslice-reconcile-prod, got %d objects:\n%s", len(reconcileObjs), out)
	}
	ps, c := d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0]
	if ps.SecurityContext.RunAsUser == nil || *ps.SecurityContext.RunAsUser != 65532 || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("pod security %+v, container %+v: want uid 65532 and a read-only root", ps.SecurityContext, c.SecurityContext)
	}
	for _, want := range []string{"--git-url=https://git.example.com/platform/gpu-stacks.git", "--git-ref=main", "--git-path=stacks/prod", "--stack=prod", "--git-dir=/tmp/git", "--metrics-address=:9402"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp" || ps.Volumes[0].EmptyDir == nil {
		t.Errorf("volumes %+v: want an emptyDir on /tmp for the clone", ps.Volumes)
	}
	if _, err := deploy.RenderManifests(namespace, map[string]any{"reconcile": map[string]any{"enabled": true, "stack": "prod"}}); err == nil || !strings.Contains(err.Error(), "reconcile.gitURL") {
		t.Errorf("reconcile without gitURL: error %v, want one naming reconcile.gitURL", err)
	}

	cl := clustertest.Start(t, cluster.Options{})
	ctx, client := context.Background(), cl.Client()
	if _, err := cluster.CreateNamespace(ctx, client, namespace, nil); err != nil {
		t.Fatal(err)
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, o := range reconcileObjs {
		var err error
		switch v := o.(type) {
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, dry)
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, v, dry)
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, v, dry)
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(v.Namespace).Create(ctx, v, dry)
		case *appsv1.Deployment:
			_, err = client.AppsV1().Deployments(v.Namespace).Create(ctx, v, dry)
		}
		if err != nil {
			t.Errorf("%T: %v", o, err)
		}
	}
}
