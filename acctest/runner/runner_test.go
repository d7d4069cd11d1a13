package runner

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/realnode/realnodetest"
)

// The state Secret and lock Lease of the guide's backend.
const (
	stateSecret = "tfstate-default-gpuslice"
	stateLease  = "lock-tfstate-default-gpuslice"
)

var (
	apply   = []string{"apply", "-auto-approve", "-input=false", "-no-color"}
	planned = []string{"plan", "-detailed-exitcode", "-input=false", "-no-color"}
	destroy = []string{"destroy", "-auto-approve", "-input=false", "-no-color"}
)

// tofu-controller's way on real nodes: a runner pod applies the quickstart,
// a fresh one plans nothing, one deleted in the middle of its apply leaves
// the state, the lock and the cluster so that the next run converges, and a
// destroy then leaves nothing behind (no object the interrupted run made
// escaped the state).
func TestTofuControllerRunner(t *testing.T) {
	env := realnodetest.Shared(t)
	setUpRunner(t, env)
	// The administrator applies the platform, which binds the runner.
	mustRun(t, env, podAs(env, adminAccount, "bootstrap", "stack-v1", tofuInit,
		[]string{"apply", "-auto-approve", "-input=false", "-no-color", "-target=gpuslice_platform.this"}))

	logs := mustRun(t, env, runnerPod(env, "apply-1", "stack-v1", tofuInit, apply))
	if !strings.Contains(logs, "Apply complete!") {
		t.Fatalf("the first run did not apply:\n%s", logs)
	}
	checkState(t, env)
	mustRun(t, env, runnerPod(env, "plan-1", "stack-v1", tofuInit, planned))

	// Deleted while apply waits for the slow job it created.
	pod := runnerPod(env, "apply-2", "stack-v2", tofuInit, apply)
	if _, err := env.Cluster.Client().CoreV1().Pods(runnerNamespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	interrupted := waitForLine(t, env, pod.Name, "apply-1", "gpuslice_workload.slow: Creating...")
	// OpenTofu prints Creating before the provider is asked: the pod goes
	// once the job exists, while apply waits for it.
	realnodetest.Eventually(t, runTimeout, "the runner creates the slow job", func() (bool, string) {
		_, err := env.Cluster.Client().BatchV1().Jobs("team-a").Get(context.Background(), "slow", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	last := deleteAndWait(t, env, pod.Name)
	log := interrupted()
	t.Logf("the deleted runner's apply:\n%s", log[strings.Index(log, "Plan:"):])
	for _, c := range last.Status.ContainerStatuses {
		if c.State.Terminated == nil || c.State.Terminated.ExitCode == 137 {
			t.Errorf("the runner did not stop on SIGTERM within its grace period: %+v", c.State)
		} else {
			t.Logf("the deleted runner's apply exited %d (%s)", c.State.Terminated.ExitCode, c.State.Terminated.Reason)
		}
	}
	checkState(t, env)
	job, err := env.Cluster.Client().BatchV1().Jobs("team-a").Get(context.Background(), "slow", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the job the deleted runner created: %v", err)
	}

	logs = mustRun(t, env, runnerPod(env, "apply-3", "stack-v2", tofuInit, apply))
	t.Logf("the run after the deleted one:\n%s", logs[strings.Index(logs, "apply-1"):])
	again, err := env.Cluster.Client().BatchV1().Jobs("team-a").Get(context.Background(), "slow", metav1.GetOptions{})
	if err != nil || again.UID != job.UID {
		t.Errorf("the job the interrupted run created was replaced (or is gone: %v): the interruption is not the workload's failure", err)
	}
	mustRun(t, env, runnerPod(env, "plan-2", "stack-v2", tofuInit, planned))
	if objs := managed(t, env); len(objs) == 0 {
		t.Fatal("no object labelled as gpuslice's after apply: the leftover check below could not see any")
	}
	// The runner would lose its rights with the platform: the
	// administrator destroys.
	mustRun(t, env, podAs(env, adminAccount, "destroy-1", "stack-v2", tofuInit, destroy))
	if left := managed(t, env); len(left) > 0 {
		t.Errorf("left after destroy: %v", left)
	}
}

// setUpRunner makes the runner's namespace and ServiceAccount, an
// administrator's (cluster-admin) who binds it through the platform, the
// provider's release in the OCI registry, the runner image, the CLI
// configuration and the two versions of the stack.
func setUpRunner(t *testing.T, env *realnodetest.Env) {
	t.Helper()
	ctx := context.Background()
	c := env.Cluster.Client()
	if _, err := cluster.CreateNamespace(ctx, c, runnerNamespace, nil); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, name := range []string{runnerAccount, adminAccount} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: runnerNamespace}}
		if _, err := c.CoreV1().ServiceAccounts(runnerNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	admin := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tf-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: runnerNamespace, Name: adminAccount}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, admin, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ca := publishProvider(t, env)
	pushRunnerImage(t, env, ca)
	for name, data := range map[string]map[string]string{
		"cli-config": {"tofurc": cliConfig(t)},
		"stack-v1":   {"main.tf": quickstart(t, "")},
		"stack-v2":   {"main.tf": quickstart(t, slowJob)},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: runnerNamespace}, Data: data}
		if _, err := c.CoreV1().ConfigMaps(runnerNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkState: the state is in its Secret, and its lock is free.
func checkState(t *testing.T, env *realnodetest.Env) {
	t.Helper()
	ctx := context.Background()
	c := env.Cluster.Client()
	secret, err := c.CoreV1().Secrets(runnerNamespace).Get(ctx, stateSecret, metav1.GetOptions{})
	if err != nil || len(secret.Data["tfstate"]) == 0 {
		t.Fatalf("the state Secret %s/%s: %v, %d bytes of tfstate", runnerNamespace, stateSecret, err, len(secret.Data["tfstate"]))
	}
	lease, err := c.CoordinationV1().Leases(runnerNamespace).Get(ctx, stateLease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the lock Lease %s/%s: %v", runnerNamespace, stateLease, err)
	}
	if h := lease.Spec.HolderIdentity; h != nil {
		t.Errorf("the lock Lease %s/%s is still held by %s: %v", runnerNamespace, stateLease, *h, lease.Annotations)
	}
}
