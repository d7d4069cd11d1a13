package incluster

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpuslice/gpuslice/deploy"
	"github.com/gpuslice/gpuslice/engine/reconcile"
	"github.com/gpuslice/gpuslice/engine/render"
	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/gitserver"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// interval is the test's reconcile.interval.
const interval = 5 * time.Second

// The quota the stack's commits change and an out-of-band edit breaks.
const (
	tenant    = "team-a"
	quotaName = render.QuotaName
	quotaKey  = corev1.ResourceRequestsMemory
)

// The reconciler as the guide installs it, on a real node: it applies the
// quickstart from a repository on this machine's Git server, follows a
// commit, reverts a kubectl-style edit of the stack's quota, and reports
// the revision and inSync in its status ConfigMap and its metrics. Its pod
// runs as uid 65532 with a read-only root and no kubeconfig, its
// ServiceAccount bound to the runner's role and its own status role only.
func TestInClusterReconcile(t *testing.T) {
	env := realnodetest.Shared(t)
	ctx := context.Background()
	client := env.Cluster.Client()

	srv := gitserver.New(t)
	podURL := reachable(t, env, srv.URL)
	file := stackPath + "/main.tf"
	rev1 := srv.Commit("quickstart", map[string]string{file: quickstart("16Gi")})

	namespace, values := helmInstall(t, podURL)
	rc, _ := values["reconcile"].(map[string]any)
	stack, _ := rc["stack"].(string)
	image, _ := rc["image"].(map[string]any)
	repository, _ := image["repository"].(string)
	if rc["path"] != stackPath || stack == "" || repository == "" {
		t.Fatalf("the guide's helm line sets reconcile %v: want path %s, a stack and an image repository", rc, stackPath)
	}
	pushReconcileImage(t, env, repository)
	localValues(env, values, env.PushNodePlugin(t, "0.1.0"), interval)
	defaults, err := deploy.DefaultValues()
	if err != nil {
		t.Fatal(err)
	}
	inventory := defaults["reconcile"].(map[string]any)["inventoryNamespace"].(string)

	if _, err := cluster.CreateNamespace(ctx, client, namespace, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, ns := range []string{tenant, namespace} {
			if err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete namespace %s: %v", ns, err)
			}
		}
	})
	start := time.Now()
	chart := install(t, env, namespace, values)
	// Last in, first out: the reconciler stops, the stack goes (its pods
	// while the node plugin still unprepares their claims), then the rest.
	t.Cleanup(func() { chart.remove(t, nil) })
	t.Cleanup(func() { destroy(t, env, stack) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(reconcilerLogs(client, namespace, stack))
		}
		chart.remove(t, func(u *unstructured.Unstructured) bool { return u.GetKind() == "Deployment" })
	})

	waitStatus(t, client, inventory, stack, 5*time.Minute, "the first commit applied", func(d map[string]string) bool {
		return d[reconcile.KeyLastAppliedRevision] == rev1 && d[reconcile.KeyInSync] == "true"
	})
	t.Logf("from install to the first commit in sync (node plugin and reconciler pods started): %s", time.Since(start).Round(time.Millisecond))
	waitAvailable(t, client, tenant, "llm")
	checkPod(t, client, namespace, stack)
	checkRights(t, client, namespace, stack)
	assertQuota(t, client, "16Gi")

	start = time.Now()
	rev2 := srv.Commit("more memory for team-a", map[string]string{file: quickstart("24Gi")})
	waitStatus(t, client, inventory, stack, 3*time.Minute, "the second commit applied", func(d map[string]string) bool {
		return d[reconcile.KeyLastAppliedRevision] == rev2 && d[reconcile.KeyInSync] == "true"
	})
	t.Logf("commit %.8s followed in %s (interval %s)", rev2, time.Since(start).Round(time.Millisecond), interval)
	assertQuota(t, client, "24Gi")

	// Someone edits the quota by hand, as kubectl edit does.
	q, err := client.CoreV1().ResourceQuotas(tenant).Get(ctx, quotaName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard[quotaKey] = resource.MustParse("99Gi")
	if _, err := client.CoreV1().ResourceQuotas(tenant).Update(ctx, q, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	waitQuota(t, client, "24Gi", 3*time.Minute)
	t.Logf("the kubectl-style edit reverted in %s (interval %s)", time.Since(start).Round(time.Millisecond), interval)

	cm, err := client.CoreV1().ConfigMaps(inventory).Get(ctx, reconcile.StatusName(stack), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[reconcile.KeyRevision] != rev2 || cm.Data[reconcile.KeyInSync] != "true" {
		t.Errorf("status ConfigMap %s/%s: %v, want revision %s in sync", inventory, cm.Name, cm.Data, rev2)
	}
	scrape := metrics(t, client, namespace, stack)
	for _, want := range []string{
		`gpuslice_reconcile_last_applied_revision{revision="` + rev2 + `",stack="` + stack + `"} 1`,
		`gpuslice_reconcile_in_sync{stack="` + stack + `"} 1`,
		`gpuslice_reconcile_errors_total{stack="` + stack + `"} `,
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("the reconciler's metrics lack %s:\n%s", want, scrape)
		}
	}
}

// reachable makes the Git server at serverURL (on loopback) reachable from
// the node's pods at the node's address, and returns the URL they clone.
func reachable(t *testing.T, env *realnodetest.Env, serverURL string) string {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	node := env.Nodes[0]
	if err := node.Forward(port, u.Host); err != nil {
		t.Fatal(err)
	}
	return "http://" + net.JoinHostPort(node.IP, u.Port()) + u.Path
}
