package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// Ctrl-C (SIGINT) or SIGTERM to gpuslice apply mid-way: it stops starting
// writes, lets the one in flight finish, records what it did in the
// inventory, releases the lock and exits non-zero saying so; the next plan
// shows exactly the rest, and one apply finishes it.
func TestInterruptedApplyStopsCleanly(t *testing.T) {
	c := clustertest.Shared(t)
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			stack := "intr-" + map[syscall.Signal]string{syscall.SIGINT: "int", syscall.SIGTERM: "term"}[sig]
			dir := writeConfig(t, stackConfig(stack, 150, "4096"))
			cmd, out, exited := start(t, env, "apply", dir, "-stack", stack, "-auto-approve", "-no-wait", "-parallelism", "1")
			for strings.Count(out.String(), " created [") < 20 {
				select {
				case <-exited:
					t.Fatalf("apply ended before 20 objects were created:\n%s", out.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			cmd.Process.Signal(sig)
			<-exited
			text := out.String()
			m := regexp.MustCompile(`stopped \(interrupted by ` + sig.String() + `\) after (\d+) of (\d+) changes`).FindStringSubmatch(text)
			if cmd.ProcessState.ExitCode() != 1 || m == nil || !strings.Contains(text, "Interrupt received") || strings.Contains(text, "Apply complete") {
				t.Fatalf("apply after %s: exit %d\n%s", sig, cmd.ProcessState.ExitCode(), text)
			}
			done, total := atoi(t, m[1]), atoi(t, m[2])
			e.Refresh() // a new run, which reads what the apply wrote
			if h, err := e.Locks().Holder(ctx, stack); err != nil || h != nil {
				t.Fatalf("the lock is still held by %+v (%v)", h, err)
			}
			inv, err := e.Inventory.Load(ctx, stack)
			if err != nil || len(inv) != done {
				t.Fatalf("the inventory lists %d objects after %d of %d changes (%v)", len(inv), done, total, err)
			}
			// The next plan is exactly the unfinished work.
			js, code := run(t, env, "plan", dir, "-stack", stack, "-json", "-detailed-exitcode")
			var doc struct{ Summary map[string]int }
			if code != 2 || json.Unmarshal([]byte(js), &doc) != nil {
				t.Fatalf("plan after the interrupt: exit %d\n%s", code, js)
			}
			want := map[string]int{"create": total - done}
			for k, v := range doc.Summary {
				if v != want[k] {
					t.Fatalf("after stopping at %d of %d, the plan's summary is %v, want %v", done, total, doc.Summary, want)
				}
			}
			if o, code := run(t, env, "apply", dir, "-stack", stack, "-auto-approve", "-no-wait"); code != 0 {
				t.Fatalf("apply after the interrupt: exit %d\n%s", code, o)
			}
			if o, code := run(t, env, "plan", dir, "-stack", stack, "-detailed-exitcode"); code != 0 {
				t.Fatalf("plan after finishing: exit %d\n%s", code, o)
			}
			run(t, env, "destroy", dir, "-stack", stack, "-auto-approve")
		})
	}
}

// A second Ctrl-C exits at once, even with a write in flight (here a
// replacement whose old Job a finalizer holds): the lock is left to
// expire, and the next apply — after force-unlock — converges.
func TestSecondInterruptExitsAtOnce(t *testing.T) {
	c := clustertest.Shared(t)
	env := []string{"KUBECONFIG=" + c.KubeconfigPath}
	e, err := engine.New(c.RESTConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const stack = "intr-twice"
	config := func(image string) string {
		return stackConfig(stack, 3, "4096") + fmt.Sprintf(`
resource "gpuslice_workload" "job" {
  namespace = gpuslice_quota.q.namespace
  name      = "job"
  package   = gpuslice_package.small.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = %q
    memory_request = "64Mi"
  }
}
`, image)
	}
	dir := writeConfig(t, config("pytorch/pytorch:2.4.1"))
	if o, code := run(t, env, "apply", dir, "-stack", stack, "-auto-approve", "-no-wait"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, o)
	}
	jobs := c.Client().BatchV1().Jobs(stack)
	hold := []byte(`{"metadata":{"finalizers":["gpuslice.test/hold"]}}`)
	if _, err := jobs.Patch(ctx, "job", types.MergePatchType, hold, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		jobs.Patch(ctx, "job", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	t.Cleanup(release)

	next := writeConfig(t, config("pytorch/pytorch:2.5.0"))
	cmd, out, exited := start(t, env, "apply", next, "-stack", stack, "-auto-approve", "-no-wait")
	// The replacement is in flight once the old Job is being deleted.
	for {
		j, err := jobs.Get(ctx, "job", metav1.GetOptions{})
		if err == nil && j.DeletionTimestamp != nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("apply ended before replacing the job:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	waitOutput(t, out, exited, "Gracefully shutting down...")
	cmd.Process.Signal(syscall.SIGINT)
	<-exited
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(out.String(), "Two interrupts received. Exiting immediately.") {
		t.Fatalf("apply after two interrupts: exit %d\n%s", cmd.ProcessState.ExitCode(), out.String())
	}
	// The lock is left behind, held by the apply that exited: a writer
	// waiting for it takes it over once it has seen it unrenewed for 15 s.
	h, err := e.Locks().Holder(ctx, stack)
	if err != nil || h == nil || h.Operation != "gpuslice apply" || h.Duration != 15*time.Second {
		t.Fatalf("lock after exiting at once: %+v (%v)", h, err)
	}
	release()
	if o, code := run(t, env, "force-unlock", stack, "-force"); code != 0 {
		t.Fatalf("force-unlock: exit %d\n%s", code, o)
	}
	if o, code := run(t, env, "apply", next, "-stack", stack, "-auto-approve", "-no-wait"); code != 0 {
		t.Fatalf("apply after two interrupts: exit %d\n%s", code, o)
	}
	if o, code := run(t, env, "plan", next, "-stack", stack, "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan after finishing: exit %d\n%s", code, o)
	}
	run(t, env, "destroy", next, "-stack", stack, "-auto-approve")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
