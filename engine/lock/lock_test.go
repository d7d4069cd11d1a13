package lock

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpuslice/gpuslice/internal/cluster"
	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

func TestMain(m *testing.M) {
	os.Exit(clustertest.Main(m, cluster.Options{}, nil))
}

func store(t *testing.T) Store {
	c := clustertest.Shared(t)
	return Store{Client: c.Client(), Namespace: "gpuslice-system"}
}

func acquire(t *testing.T, s Store, stack string, opts Options) *Lock {
	t.Helper()
	l, err := s.Acquire(context.Background(), stack, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	return l
}

// The lock is a Lease beside the inventory with the holder on it; a
// second writer fails at once, naming the holder and since when, in
// Terraform's words; release removes the Lease and the next writer gets it.
func TestSecondWriterFailsNamingTheHolder(t *testing.T) {
	s := store(t)
	ctx := context.Background()
	first := acquire(t, s, "held", Options{Who: "alice@laptop", Operation: "gpuslice apply", Path: "/work/infra"})

	lease, err := s.Client.CoordinationV1().Leases("gpuslice-system").Get(ctx, "gpuslice-lock-held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity != first.Info().ID || *lease.Spec.LeaseDurationSeconds != 15 || lease.Spec.AcquireTime == nil ||
		lease.Annotations["gpuslice.dev/lock-who"] != "alice@laptop" || lease.Annotations["gpuslice.dev/stack"] != "held" {
		t.Fatalf("lease = %+v %v", lease.Spec, lease.Annotations)
	}

	_, err = s.Acquire(ctx, "held", Options{Who: "bob@desk", Operation: "gpuslice apply"})
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Acquire: %v, want a HeldError", err)
	}
	msg := err.Error()
	for _, want := range []string{"Error acquiring the state lock", `stack "held" is locked by alice@laptop (gpuslice apply) since`,
		"ID:        " + first.Info().ID, "Path:      /work/infra", "-lock-timeout", "gpuslice force-unlock held", "-lock=false"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}

	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoordinationV1().Leases("gpuslice-system").Get(ctx, "gpuslice-lock-held", metav1.GetOptions{}); err == nil {
		t.Error("the Lease is still there after Release")
	}
	second := acquire(t, s, "held", Options{Who: "bob@desk", Operation: "gpuslice apply"})
	if second.TookOver != nil {
		t.Errorf("a released lock counts as taken over from %v", second.TookOver)
	}
}

// With a timeout the second writer waits, says so once, and gets the lock
// when the first releases it.
func TestWaitForTheHolder(t *testing.T) {
	s := store(t)
	first := acquire(t, s, "wait", Options{Operation: "gpuslice reconcile"})
	waiting := make(chan Info, 1)
	got := make(chan error, 1)
	go func() {
		l, err := s.Acquire(context.Background(), "wait", Options{Operation: "gpuslice apply", Timeout: time.Minute,
			Waiting: func(h Info, _ bool) { waiting <- h }})
		if err == nil {
			defer l.Release(context.Background())
		}
		got <- err
	}()
	select {
	case h := <-waiting:
		if h.ID != first.Info().ID || h.Operation != "gpuslice reconcile" {
			t.Errorf("waiting for %+v", h)
		}
	case err := <-got:
		t.Fatalf("Acquire returned while the lock was held: %v", err)
	}
	first.Release(context.Background())
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// The holder renews its lock: it stays held well past its duration. A
// holder that stops renewing (killed) loses it once a waiting writer has
// seen it unrenewed for its duration, and that writer takes it over,
// knowing from whom. (The exact bound is held by the fake-clock tests in
// clock_test.go; this is the real clock.)
func TestRenewalAndTakeOver(t *testing.T) {
	s := store(t)
	ctx := context.Background()
	first := acquire(t, s, "renew", Options{Who: "alice@laptop", Operation: "gpuslice apply", Duration: 2 * time.Second})
	// Two full durations pass while the holder renews.
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		if _, err := s.Acquire(ctx, "renew", Options{Operation: "probe"}); err == nil {
			t.Fatalf("took a renewed lock after %s", time.Since(start))
		}
		select {
		case <-first.Lost():
			t.Fatalf("holder lost its lock: %v", first.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	first.Abandon()
	abandoned := time.Now()
	second, err := s.Acquire(ctx, "renew", Options{Who: "bob@desk", Operation: "gpuslice apply", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	if second.TookOver == nil || second.TookOver.ID != first.Info().ID || second.TookOver.Who != "alice@laptop" {
		t.Errorf("TookOver = %+v, want the abandoned holder", second.TookOver)
	}
	if waited := time.Since(abandoned); waited < 2*time.Second {
		t.Errorf("took over a 2s lease after %s: a waiter watches it unrenewed for 2s, never less", waited)
	}
}

// force-unlock removes the lock; a holder still running notices at its
// next renewal and reports the lock lost, through its context too.
func TestForceUnlockFencesTheHolder(t *testing.T) {
	s := store(t)
	ctx := context.Background()
	if info, err := s.ForceUnlock(ctx, "nobody"); err != nil || info != nil {
		t.Fatalf("force-unlock of an unlocked stack: %v %v", info, err)
	}
	first := acquire(t, s, "force", Options{Operation: "gpuslice apply", Duration: 3 * time.Second})
	lctx, cancel := first.Context(ctx)
	defer cancel()
	info, err := s.ForceUnlock(ctx, "force")
	if err != nil || info == nil || info.ID != first.Info().ID {
		t.Fatalf("ForceUnlock = %+v, %v", info, err)
	}
	select {
	case <-first.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder did not notice the force-unlock within a renewal")
	}
	<-lctx.Done()
	if cause := context.Cause(lctx); cause == nil || !strings.Contains(cause.Error(), "force-unlock") {
		t.Errorf("context cause = %v", cause)
	}
	if err := first.Release(ctx); err != nil {
		t.Errorf("releasing a lost lock: %v", err)
	}
	acquire(t, s, "force", Options{Operation: "gpuslice apply"})
}

// lostAnswers lets creates and updates of leases reach the API server,
// then drops the answer, as a cancelled context or a dropped connection
// does after the request was sent.
type lostAnswers struct {
	next   http.RoundTripper
	stored *atomic.Int32
}

func (l lostAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || (req.Method != http.MethodPost && req.Method != http.MethodPut) || !strings.Contains(req.URL.Path, "/leases") {
		return resp, err
	}
	resp.Body.Close()
	if resp.StatusCode < 300 {
		l.stored.Add(1)
	}
	return nil, errors.New("connection reset after the request was sent")
}

// An Acquire whose write the API server stored but whose answer never came
// back (Terraform interrupted mid-request cancels the provider's context)
// leaves no lock behind: the next writer gets it at once, instead of
// failing until the lease expires, held by nobody.
func TestAcquireCutOffMidWriteLeavesNoLock(t *testing.T) {
	c := clustertest.Shared(t)
	ctx := context.Background()
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpuslice-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	leases := c.Client().CoordinationV1().Leases("gpuslice-system")
	for _, tc := range []struct {
		name, stack string
		holderless  bool // a lease without a holder is taken over with an update
	}{{"create", "cut-create", false}, {"take over", "cut-takeover", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.holderless {
				if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: Name(tc.stack)}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var stored atomic.Int32
			cfg := rest.CopyConfig(c.RESTConfig())
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return lostAnswers{rt, &stored} })
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cut := Store{Client: client, Namespace: "gpuslice-system"}
			if l, err := cut.Acquire(ctx, tc.stack, Options{Operation: "terraform apply"}); err == nil {
				l.Abandon()
				t.Fatal("Acquire succeeded without the answer to its write")
			} else if !strings.Contains(err.Error(), "Error acquiring the state lock: "+tc.name) {
				t.Errorf("error = %v", err)
			}
			if stored.Load() != 1 {
				t.Fatalf("%d lease writes stored, want the one whose answer was lost", stored.Load())
			}
			acquire(t, store(t), tc.stack, Options{Operation: "the next apply"})
		})
	}
}
