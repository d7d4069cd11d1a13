package deploy_test

import (
	"context"
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/deploy"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// A chart-only install (no gpuslice_platform) gives the runner
// flux-system/tf-runner and the reconciler their rights: the API server
// takes the role and bindings, and authorizes both ServiceAccounts for
// what a stack's apply writes, the runner for its state Secret in its own
// namespace, and neither for secrets elsewhere nor for binding other roles.
func TestChartRunnerRBACOnTheAPIServer(t *testing.T) {
	values := maps.Clone(reconcileValues)
	maps.Copy(values, runnerValues)
	objs, err := deploy.Render(namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	cl := clustertest.Start(t, cluster.Options{})
	ctx, client := context.Background(), cl.Client()
	for _, ns := range []string{namespace, "flux-system"} {
		if _, err := cluster.CreateNamespace(ctx, client, ns, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		var err error
		switch v := o.(type) {
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, v, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, v, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		case *appsv1.Deployment, *appsv1.DaemonSet:
			// no pods here: only the rights are checked
		default:
			continue
		}
		if err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}

	runner := "system:serviceaccount:flux-system:tf-runner"
	reconciler := "system:serviceaccount:" + namespace + ":gpuslice-reconcile-prod"
	for _, c := range []struct {
		user string
		attr authzv1.ResourceAttributes
		want bool
	}{
		{runner, authzv1.ResourceAttributes{Group: "resource.k8s.io", Resource: "deviceclasses", Verb: "create"}, true},
		{runner, authzv1.ResourceAttributes{Namespace: "team-a", Group: "apps", Resource: "deployments", Verb: "patch"}, true},
		{runner, authzv1.ResourceAttributes{Namespace: "flux-system", Resource: "secrets", Verb: "update"}, true},
		{runner, authzv1.ResourceAttributes{Namespace: "flux-system", Group: "coordination.k8s.io", Resource: "leases", Verb: "create"}, true},
		{runner, authzv1.ResourceAttributes{Namespace: "team-a", Resource: "secrets", Verb: "get"}, false},
		{runner, authzv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "cluster-admin", Verb: "bind"}, false},
		{runner, authzv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "gpuslice-tenant", Verb: "bind"}, true},
		{reconciler, authzv1.ResourceAttributes{Group: "resource.k8s.io", Resource: "deviceclasses", Verb: "create"}, true},
		{reconciler, authzv1.ResourceAttributes{Namespace: namespace, Group: "coordination.k8s.io", Resource: "leases", Verb: "update"}, true},
		{reconciler, authzv1.ResourceAttributes{Namespace: namespace, Resource: "events", Verb: "create"}, true},
		{reconciler, authzv1.ResourceAttributes{Namespace: "flux-system", Resource: "secrets", Verb: "get"}, false},
	} {
		if got := allowed(t, client, c.user, c.attr); got != c.want {
			t.Errorf("%s may %s %s/%s %s in %q: %v, want %v", c.user, c.attr.Verb, c.attr.Group, c.attr.Resource, c.attr.Name, c.attr.Namespace, got, c.want)
		}
	}
}

// allowed asks the API server whether user may do attr.
func allowed(t *testing.T, client kubernetes.Interface, user string, attr authzv1.ResourceAttributes) bool {
	t.Helper()
	r, err := client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attr},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}
