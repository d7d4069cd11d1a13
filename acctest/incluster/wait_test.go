package incluster

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/apply"
	"github.com/gpuslice/gpuslice/engine/reconcile"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// until watches the object name of resource in namespace until cond holds
// of it, failing the test with its last state when timeout (a bound for a
// hung cluster, not a timing target) passes first.
func until[T runtime.Object](t *testing.T, rc rest.Interface, resource, namespace, name string, timeout time.Duration, what string, cond func(T) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	lw := cache.NewListWatchFromClient(rc, resource, namespace, fields.OneTermEqualSelector("metadata.name", name))
	var zero T
	objType := reflect.New(reflect.TypeOf(zero).Elem()).Interface().(T)
	last := "not seen"
	_, err := watchtools.UntilWithSync(ctx, lw, objType, nil, func(ev watch.Event) (bool, error) {
		o, ok := ev.Object.(T)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		done, state := cond(o)
		last = state
		return done, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (%v); last state: %s", what, timeout, err, last)
	}
}

// waitStatus waits until the reconciler's status ConfigMap satisfies cond.
func waitStatus(t *testing.T, client kubernetes.Interface, inventory, stack string, timeout time.Duration, what string, cond func(map[string]string) bool) {
	t.Helper()
	until(t, client.CoreV1().RESTClient(), "configmaps", inventory, reconcile.StatusName(stack), timeout, what, func(cm *corev1.ConfigMap) (bool, string) {
		return cond(cm.Data), fmt.Sprint(cm.Data)
	})
}

// waitAvailable waits until the workload's Deployment has a pod available:
// it runs on its slice, prepared by the chart's node plugin.
func waitAvailable(t *testing.T, client kubernetes.Interface, namespace, name string) {
	t.Helper()
	until(t, client.AppsV1().RESTClient(), "deployments", namespace, name, 3*time.Minute, "workload "+name+" available", func(d *appsv1.Deployment) (bool, string) {
		return d.Status.AvailableReplicas > 0, fmt.Sprintf("%+v", d.Status)
	})
}

// waitQuota waits until the tenant's quota grants want of memory requests.
func waitQuota(t *testing.T, client kubernetes.Interface, want string, timeout time.Duration) {
	t.Helper()
	w := resource.MustParse(want)
	until(t, client.CoreV1().RESTClient(), "resourcequotas", tenant, quotaName, timeout, "quota "+tenant+"/"+quotaName+" at "+want, func(q *corev1.ResourceQuota) (bool, string) {
		have := q.Spec.Hard[quotaKey]
		return have.Cmp(w) == 0, fmt.Sprintf("%s %s", quotaKey, have.String())
	})
}

// assertQuota: the tenant's quota grants want of memory requests now.
func assertQuota(t *testing.T, client kubernetes.Interface, want string) {
	t.Helper()
	q, err := client.CoreV1().ResourceQuotas(tenant).Get(context.Background(), quotaName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if have, w := q.Spec.Hard[quotaKey], resource.MustParse(want); have.Cmp(w) != 0 {
		t.Errorf("quota %s/%s: %s is %s, want %s", tenant, quotaName, quotaKey, have.String(), want)
	}
}

// reconcilerPod is the one running pod of the stack's reconciler.
func reconcilerPod(t *testing.T, client kubernetes.Interface, namespace, stack string) corev1.Pod {
	t.Helper()
	selector := "app.kubernetes.io/name=gpuslice-reconcile,app.kubernetes.io/instance=" + stack
	pods, err := client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("want one running reconciler pod (%s), got %d: %+v", selector, len(pods.Items), pods.Items)
	}
	return pods.Items[0]
}

// checkPod: the reconciler runs as uid 65532, with a read-only root, its
// only volumes an emptyDir for the clone and the ServiceAccount's token,
// and nothing pointing at a kubeconfig.
func checkPod(t *testing.T, client kubernetes.Interface, namespace, stack string) {
	t.Helper()
	p := reconcilerPod(t, client, namespace, stack)
	sc, c := p.Spec.SecurityContext, p.Spec.Containers[0]
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("reconciler pod %s: pod security %+v, container %+v: want uid 65532 and a read-only root", p.Name, sc, c.SecurityContext)
	}
	for _, v := range p.Spec.Volumes {
		token := v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-")
		if !token && (v.Name != "tmp" || v.EmptyDir == nil) {
			t.Errorf("reconciler pod %s has volume %s (%+v): want only the emptyDir tmp and the ServiceAccount's token", p.Name, v.Name, v.VolumeSource)
		}
	}
	for _, e := range c.Env {
		if strings.Contains(strings.ToUpper(e.Name), "KUBECONFIG") {
			t.Errorf("reconciler pod %s sets %s", p.Name, e.Name)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.Contains(a, "kubeconfig") }) {
		t.Errorf("reconciler pod %s: args %v name a kubeconfig", p.Name, c.Args)
	}
}

// checkRights: the reconciler's ServiceAccount is bound to the runner's
// ClusterRole and, in the inventory namespace, its status role; nothing
// else.
func checkRights(t *testing.T, client kubernetes.Interface, namespace, stack string) {
	t.Helper()
	ctx := context.Background()
	account := reconcile.StatusName(stack) // the chart names its objects so
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Namespace == namespace && s.Name == account
		})
	}
	var got []string
	crbs, err := client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range crbs.Items {
		if bound(b.Subjects) {
			got = append(got, "ClusterRoleBinding "+b.Name+" -> "+b.RoleRef.Kind+" "+b.RoleRef.Name)
		}
	}
	rbs, err := client.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range rbs.Items {
		if bound(b.Subjects) {
			got = append(got, "RoleBinding "+b.Namespace+"/"+b.Name+" -> "+b.RoleRef.Kind+" "+b.RoleRef.Name)
		}
	}
	slices.Sort(got)
	want := []string{
		"ClusterRoleBinding " + account + " -> ClusterRole gpuslice-runner",
		"RoleBinding gpuslice-system/" + account + " -> ClusterRole " + account,
	}
	if !slices.Equal(got, want) {
		t.Errorf("the reconciler's ServiceAccount %s/%s is bound by %v, want only %v", namespace, account, got, want)
	}
}

// metrics reads the reconciler's /metrics through the API server's pod
// proxy, as `kubectl get --raw` does.
func metrics(t *testing.T, client kubernetes.Interface, namespace, stack string) string {
	t.Helper()
	p := reconcilerPod(t, client, namespace, stack)
	port := ""
	for _, cp := range p.Spec.Containers[0].Ports {
		if cp.Name == "metrics" {
			port = fmt.Sprint(cp.ContainerPort)
		}
	}
	if port == "" {
		t.Fatalf("reconciler pod %s has no port named metrics", p.Name)
	}
	data, err := client.CoreV1().Pods(namespace).ProxyGet("http", p.Name, port, "metrics", nil).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("scrape %s/%s:%s/metrics through the API server: %v", namespace, p.Name, port, err)
	}
	return string(data)
}

// destroy removes what the reconciler applied, as an administrator
// would once it has stopped, and waits until the tenant's pods are gone.
func destroy(t *testing.T, env *realnodetest.Env, stack string) {
	t.Helper()
	ctx := context.Background()
	e, err := engine.New(env.Cluster.RESTConfig(), "")
	if err != nil {
		t.Error(err)
		return
	}
	defer e.Close()
	p, err := e.PlanDestroy(ctx, stack)
	if err == nil {
		err = e.Destroy(ctx, p, apply.Options{})
	}
	if err != nil {
		t.Errorf("destroy stack %s: %v", stack, err)
		return
	}
	realnodetest.Eventually(t, 2*time.Minute, "the tenant's pods gone", func() (bool, string) {
		pods, err := env.Cluster.Client().CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
}

// reconcilerLogs are the logs of the stack's reconciler pods, for a test
// that failed.
func reconcilerLogs(client kubernetes.Interface, namespace, stack string) string {
	ctx := context.Background()
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gpuslice-reconcile,app.kubernetes.io/instance=" + stack})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		data, err := client.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		fmt.Fprintf(&b, "--- reconciler pod %s (%v)\n%s\n", p.Name, err, data)
	}
	return b.String()
}
