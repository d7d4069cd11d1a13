package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/lock"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
	"github.com/gpuslice/gpuslice/internal/proc/proctest"
	"github.com/gpuslice/gpuslice/internal/testenv"
)

// stackConfig is one package, one quota and n zero-replica workloads in
// namespace ns; contextLength tells two configurations of a stack apart.
func stackConfig(ns string, n int, contextLength string) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(cliConfig, "cli", ns))
	for i := range n {
		fmt.Fprintf(&b, `
resource "gpuslice_workload" "w%d" {
  namespace = gpuslice_quota.q.namespace
  name      = "w%d"
  package   = gpuslice_package.small.name
  replicas  = 0
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    env            = { OLLAMA_CONTEXT_LENGTH = "%s" }
    memory_request = "64Mi"
  }
}
`, i, i, contextLength)
	}
	return b.String()
}

func writeConfig(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitOutput waits until the process's output contains want (or it exits).
func waitOutput(t *testing.T, out *proctest.Output, exited <-chan struct{}, want string) {
	t.Helper()
	deadline := time.After(2 * time.Minute) // a bound for a hung test, not a timing assertion
	for !strings.Contains(out.String(), want) {
		select {
		case <-exited:
			if !strings.Contains(out.String(), want) {
				t.Fatalf("exited before printing %q:\n%s", want, out.String())
			}
			return
		case <-deadline:
			t.Fatalf("never printed %q:\n%s", want, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// start starts the CLI; the test's cleanup kills it by PID if still running.
func start(t *testing.T, env []string, args ...string) (*exec.Cmd, *proctest.Output, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(gpusliceBin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, exited := proctest.Start(t, cmd)
	return cmd, out, exited
}

// The state lock in the CLI: a held lock fails apply at once with
// Terraform's words and the holder; -lock-timeout waits for it;
// force-unlock removes it and its holder learns it; -lock=false warns.
func TestStateLockInTheCLI(t *testing.T) {
	c := clustertest.Shared(t)
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := writeConfig(t, stackConfig("lockcli", 2, "4096"))
	l, err := e.Locks().Acquire(ctx, "lockcli", lock.Options{Who: "alice@laptop", Operation: "gpuslice apply"})
	if err != nil {
		t.Fatal(err)
	}
	out, code := run(t, env, "apply", dir, "-stack", "lockcli", "-auto-approve", "-no-wait")
	if code != 1 || !strings.Contains(out, "Error acquiring the state lock") || !strings.Contains(out, "alice@laptop") ||
		!strings.Contains(out, "Lock Info:") || !strings.Contains(out, "-lock-timeout") || !strings.Contains(out, "force-unlock lockcli") {
		t.Fatalf("apply of a locked stack: exit %d\n%s", code, out)
	}
	out, code = run(t, env, "destroy", dir, "-stack", "lockcli", "-auto-approve")
	if code != 1 || !strings.Contains(out, "Error acquiring the state lock") {
		t.Fatalf("destroy of a locked stack: exit %d\n%s", code, out)
	}

	// -lock-timeout waits until the holder releases it.
	cmd, buf, exited := start(t, env, "apply", dir, "-stack", "lockcli", "-auto-approve", "-no-wait", "-lock-timeout=5m")
	waitOutput(t, buf, exited, "Acquiring state lock. This may take a few moments...")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-exited
	if cmd.ProcessState.ExitCode() != 0 || !strings.Contains(buf.String(), "Apply complete") {
		t.Fatalf("apply waiting for the lock: exit %d\n%s", cmd.ProcessState.ExitCode(), buf.String())
	}
	if h, err := e.Locks().Holder(ctx, "lockcli"); err != nil || h != nil {
		t.Fatalf("after apply the lock is held by %+v (%v)", h, err)
	}

	// force-unlock removes a lock whoever holds it; the holder notices.
	l, err = e.Locks().Acquire(ctx, "lockcli", lock.Options{Who: "bob@desk", Operation: "gpuslice apply"})
	if err != nil {
		t.Fatal(err)
	}
	out, code = run(t, env, "force-unlock", "lockcli", "-force")
	if code != 0 || !strings.Contains(out, "bob@desk") || !strings.Contains(out, "successfully unlocked") {
		t.Fatalf("force-unlock: exit %d\n%s", code, out)
	}
	select {
	case <-l.Lost():
	case <-time.After(time.Minute): // a bound for a hung test
		t.Fatal("the holder never learned its lock was removed")
	}
	l.Release(ctx)

	out, code = run(t, env, "plan", dir, "-stack", "lockcli", "-detailed-exitcode")
	if code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s", code, out)
	}

	// A writer killed while holding the lock: the next apply, without
	// -lock-timeout, sees a lock that looks abandoned, watches it for its
	// duration and takes it over, saying from whom.
	l, err = e.Locks().Acquire(ctx, "lockcli", lock.Options{Who: "carol@laptop", Operation: "gpuslice apply", Duration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l.Abandon()
	h, err := e.Locks().Holder(ctx, "lockcli")
	if err != nil || h == nil {
		t.Fatalf("the killed writer's lock: %v %v", h, err)
	}
	for time.Since(h.Renewed) <= h.Duration { // its last renewal, by this very machine's clock
		time.Sleep(50 * time.Millisecond)
	}
	out, code = run(t, env, "apply", dir, "-stack", "lockcli", "-auto-approve", "-no-wait")
	if code != 0 || !strings.Contains(out, "is locked by carol@laptop (gpuslice apply), who last renewed it at") ||
		!strings.Contains(out, "looks gone: taking the lock over unless it is renewed within 2s") ||
		!strings.Contains(out, "Warning: took over the state lock of stack lockcli from carol@laptop (gpuslice apply)") {
		t.Fatalf("apply after its holder was killed: exit %d\n%s", code, out)
	}

	out, code = run(t, env, "destroy", dir, "-stack", "lockcli", "-auto-approve", "-lock=false")
	if code != 0 || !strings.Contains(out, "Warning: -lock=false") || !strings.Contains(out, "Destroy complete") {
		t.Fatalf("destroy -lock=false: exit %d\n%s", code, out)
	}
}

// The race of issue 17: two applies of two configurations of one stack
// launched at once (the second after a random offset), 10 times. With the
// lock one fails naming the holder (or, not overlapping, runs after it)
// and the cluster matches exactly one configuration; with -lock=false one
// fails with a conflict and the cluster matches the configuration that
// succeeded after at most one more apply of it — never two successes on
// a mixed cluster.
func TestTwoAppliesOfOneStackRace(t *testing.T) {
	testenv.Short(t, "10 races per mode")
	c := clustertest.Shared(t)
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}
	base := writeConfig(t, stackConfig("race", 12, "2048"))
	a := writeConfig(t, stackConfig("race", 30, "4096"))
	b := writeConfig(t, stackConfig("race", 8, "8192"))
	matches := func(dir string) bool {
		_, code := run(t, env, "plan", dir, "-stack", "race", "-detailed-exitcode")
		return code == 0
	}
	for _, locked := range []bool{true, false} {
		for i := range 10 {
			out, code := run(t, env, "apply", base, "-stack", "race", "-auto-approve", "-no-wait")
			if code != 0 {
				t.Fatalf("base apply: exit %d\n%s", code, out)
			}
			first, second := a, b
			if rand.IntN(2) == 1 {
				first, second = b, a
			}
			offset := time.Duration(rand.IntN(250)) * time.Millisecond
			flags := []string{"-stack", "race", "-auto-approve", "-no-wait"}
			if !locked {
				flags = append(flags, "-lock=false")
			}
			c1, o1, e1 := start(t, env, append([]string{"apply", first}, flags...)...)
			time.Sleep(offset) // the race's random launch offset, not a wait for an event
			c2, o2, e2 := start(t, env, append([]string{"apply", second}, flags...)...)
			<-e1
			<-e2
			ok1, ok2 := c1.ProcessState.ExitCode() == 0, c2.ProcessState.ExitCode() == 0
			outs := fmt.Sprintf("first (%s, offset %s):\n%s\nsecond:\n%s", filepath.Base(first), offset, o1.String(), o2.String())
			ma, mb := matches(a), matches(b)
			outcome := ""
			switch {
			case ok1 && ok2:
				// Only when they did not overlap: the second planned after
				// the first finished, and the cluster is the second's.
				if !(matches(second) && !matches(first)) {
					t.Fatalf("race %d (lock %v): both succeeded on a mixed cluster (matches a: %v, b: %v)\n%s", i, locked, ma, mb, outs)
				}
				outcome = "one after the other"
			case !ok1 && !ok2:
				t.Fatalf("race %d (lock %v): both failed\n%s", i, locked, outs)
			default:
				winner, loserOut := first, o2.String()
				if ok2 {
					winner, loserOut = second, o1.String()
				}
				if locked {
					if !strings.Contains(loserOut, "Error acquiring the state lock") || !strings.Contains(loserOut, "Lock Info:") {
						t.Fatalf("race %d: the loser did not name the lock holder\n%s", i, outs)
					}
					if !matches(winner) || ma == mb {
						t.Fatalf("race %d: the cluster does not match the winner's configuration alone (a: %v, b: %v)\n%s", i, ma, mb, outs)
					}
					outcome = "loser named the lock holder"
				} else {
					if !strings.Contains(loserOut, "conflict") && !strings.Contains(loserOut, "stale") {
						t.Fatalf("race %d: the loser failed without a conflict\n%s", i, outs)
					}
					outcome = "loser: conflict"
					if !matches(winner) {
						out, code := run(t, env, "apply", winner, "-stack", "race", "-auto-approve", "-no-wait", "-lock=false")
						if code != 0 || !matches(winner) {
							t.Fatalf("race %d: one more apply of the winner did not converge: exit %d\n%s\n%s", i, code, out, outs)
						}
						outcome += ", one more apply converged"
					}
				}
			}
			t.Logf("race %d (lock %v, offset %s): %s", i, locked, offset, outcome)
		}
	}
	run(t, env, "destroy", base, "-stack", "race", "-auto-approve")
}

// reconcile cooperates with humans: it takes the lock per round, says
// when it waits for someone's apply (or skips the round), and does not
// revert an apply made from a newer configuration than its directory's.
func TestReconcileCooperates(t *testing.T) {
	c := clustertest.Shared(t)
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gitops := writeConfig(t, stackConfig("coop", 2, "4096"))
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(gitops, "main.tf"), old, old); err != nil {
		t.Fatal(err)
	}
	l, err := e.Locks().Acquire(ctx, "coop", lock.Options{Who: "alice@laptop", Operation: "gpuslice apply"})
	if err != nil {
		t.Fatal(err)
	}
	out, code := run(t, env, "reconcile", gitops, "-stack", "coop", "-once")
	if code != 1 || !strings.Contains(out, "Error acquiring the state lock") {
		t.Fatalf("reconcile -once of a locked stack: exit %d\n%s", code, out)
	}
	cmd, buf, exited := start(t, env, "reconcile", gitops, "-stack", "coop", "-once", "-lock-timeout=5m")
	waitOutput(t, buf, exited, "Acquiring state lock. This may take a few moments... (stack coop is locked by alice@laptop (gpuslice apply)")
	l.Release(ctx)
	<-exited
	if cmd.ProcessState.ExitCode() != 0 || !strings.Contains(buf.String(), "stack coop: reconciled") {
		t.Fatalf("reconcile waiting for the lock: exit %d\n%s", cmd.ProcessState.ExitCode(), buf.String())
	}

	// A human applies a newer configuration than the Git checkout's.
	human := writeConfig(t, stackConfig("coop", 4, "8192"))
	if out, code := run(t, env, "apply", human, "-stack", "coop", "-auto-approve", "-no-wait"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	out, code = run(t, env, "reconcile", gitops, "-stack", "coop", "-once")
	if code != 1 || !strings.Contains(out, "from a configuration newer") || !strings.Contains(out, "reconcile does not revert it") {
		t.Fatalf("reconcile of an older configuration: exit %d\n%s", code, out)
	}
	if out, code := run(t, env, "plan", human, "-stack", "coop", "-detailed-exitcode"); code != 0 {
		t.Fatalf("reconcile changed the human's apply:\n%s", out)
	}
	// Once the Git sync brings a newer configuration, reconcile applies it.
	os.WriteFile(filepath.Join(gitops, "main.tf"), []byte(stackConfig("coop", 3, "8192")), 0o644)
	out, code = run(t, env, "reconcile", gitops, "-stack", "coop", "-once")
	if code != 0 || !strings.Contains(out, "stack coop: reconciled") {
		t.Fatalf("reconcile of a newer configuration: exit %d\n%s", code, out)
	}
	run(t, env, "destroy", gitops, "-stack", "coop", "-auto-approve")
}
