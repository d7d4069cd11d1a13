package lock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/gpuslice/gpuslice/internal/cluster/clustertest"
)

// Writers on machines whose clocks disagree, against the real control
// plane. Each machine has a fake clock, offset from the others; the test
// steps them together a quarter second at a time, so the timeline is
// exact and nothing waits for real time.

const step = 250 * time.Millisecond

// machine is one writer's machine: its clock, and its attempt to take a
// stack's lock (Acquire in a goroutine), then the lock it holds.
type machine struct {
	clock *testingclock.FakeClock
	// waits holds the timers Acquire itself waits on, apart from those
	// of a held lock's renewal (on clock), so that an Acquire waiting can
	// be told from one that just took the lock over, started its
	// renewal, and has yet to return. Stepped with clock.
	waits *testingclock.FakeClock
	start time.Time // the clock's reading at the timeline's start
	store Store
	cut   atomic.Bool // its requests to the API server fail (cut off)

	result  chan error
	pending bool
	lock    *Lock
	err     error
	killed  bool
	// told is what Waiting was told: 0 not called, 1 held, 2 abandoned.
	told atomic.Int32
}

// newMachine's clock reads the timeline's start plus offset.
func newMachine(t *testing.T, start time.Time, offset time.Duration) *machine {
	c := clustertest.Shared(t)
	m := &machine{clock: testingclock.NewFakeClock(start.Add(offset)), waits: testingclock.NewFakeClock(start.Add(offset)), start: start.Add(offset)}
	cfg := rest.CopyConfig(c.RESTConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cutOff{rt, &m.cut} })
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.store = Store{Client: client, Namespace: "gpuslice-system", Clock: splitClock{m.clock, m.waits}}
	return m
}

// splitClock is a machine's clock as the lock sees it: Acquire's timers
// on waits, every other reading and timer on the clock.
type splitClock struct {
	*testingclock.FakeClock
	waits *testingclock.FakeClock
}

func (c splitClock) NewTimer(d time.Duration) clock.Timer {
	if calledFromAcquire() {
		return c.waits.NewTimer(d)
	}
	return c.FakeClock.NewTimer(d)
}

// calledFromAcquire says whether Store.Acquire is on the caller's stack (a
// lock's renewal runs in its own goroutine, whose stack starts at renew).
func calledFromAcquire() bool {
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "/lock.Store.Acquire") {
			return true
		}
		if !more {
			return false
		}
	}
}

func (m *machine) step(d time.Duration) {
	m.clock.Step(d)
	m.waits.Step(d)
}

type cutOff struct {
	next http.RoundTripper
	cut  *atomic.Bool
}

func (c cutOff) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("network unreachable")
	}
	return c.next.RoundTrip(req)
}

// take takes a lock nobody holds: Acquire returns without waiting on the
// clock, so it runs here rather than in a goroutine the timeline would
// have to wait for.
func (m *machine) take(t *testing.T, stack string, opts Options) {
	t.Helper()
	l, err := m.store.Acquire(context.Background(), stack, opts)
	if err != nil {
		t.Fatal(err)
	}
	m.lock = l
	t.Cleanup(func() { l.Release(context.Background()) })
}

// acquire starts Acquire in a goroutine, for a lock another machine holds.
func (m *machine) acquire(stack string, opts Options) {
	m.result, m.pending, m.err = make(chan error, 1), true, nil
	opts.Waiting = func(_ Info, abandoned bool) {
		m.told.Store(map[bool]int32{false: 1, true: 2}[abandoned])
	}
	go func() {
		l, err := m.store.Acquire(context.Background(), stack, opts)
		m.lock = l // read by the test only after the send below
		m.result <- err
	}()
}

// poll collects Acquire's answer once it came.
func (m *machine) poll() {
	if !m.pending {
		return
	}
	select {
	case m.err = <-m.result:
		m.pending = false
	default:
	}
}

// settled says whether every goroutine of this machine waits on its
// clock: an Acquire not yet answered on waits, a held lock's renewal on
// clock. An Acquire that took the lock over and has yet to return (its
// renewal started) is not settled: the timeline waits for its answer.
func (m *machine) settled() bool {
	want := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	return m.waits.Waiters() == want(m.pending) && m.clock.Waiters() == want(m.holds())
}

// holds says whether this machine believes it holds the lock (and so
// may write).
func (m *machine) holds() bool {
	return !m.pending && m.lock != nil && !m.killed && m.lock.Err() == nil
}

func (m *machine) kill() {
	m.killed = true
	m.lock.Abandon()
}

// elapsed is when t, read on this machine's clock, falls on the timeline.
func (m *machine) elapsed(t time.Time) time.Duration { return t.Sub(m.start) }

// timeline steps every machine's clock together and checks, between
// steps, once every machine waits on its clock again, that no two of
// them hold the lock.
type timeline struct {
	t        *testing.T
	machines []*machine
	now      time.Duration
}

func (tl *timeline) settle() {
	tl.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, m := range tl.machines {
			m.poll()
			if !m.settled() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var s []string
		for i, m := range tl.machines {
			s = append(s, fmt.Sprintf("machine %d: Acquire waiting %d (pending %v), renewal waiting %d (holds %v)", i, m.waits.Waiters(), m.pending, m.clock.Waiters(), m.holds()))
		}
		tl.t.Fatalf("at %s the writers never settled: %s", tl.now, strings.Join(s, "; "))
	}
	holders := 0
	for _, m := range tl.machines {
		if m.holds() {
			holders++
		}
	}
	if holders > 1 {
		tl.t.Fatalf("at %s two writers hold the lock", tl.now)
	}
}

// run steps the clocks until done is true or limit has passed on the
// timeline, and says whether done became true.
func (tl *timeline) run(limit time.Duration, done func() bool) bool {
	tl.t.Helper()
	end := tl.now + limit
	for {
		tl.settle()
		if done != nil && done() {
			return true
		}
		if tl.now >= end {
			return false
		}
		for _, m := range tl.machines {
			m.step(step)
		}
		tl.now += step
	}
}

// A holder whose clock runs 30 s ahead of the waiter's, and one 30 s
// behind: while it renews, the waiter never takes the lock; killed, or cut
// off from the cluster, it stops holding before the waiter takes over,
// with a third of the duration to spare; and the waiter takes over an
// abandoned lock 15 s (the duration) to 16 s (plus its poll) after the
// last renewal it could see — as the state lock guide says, whatever the clocks
// read.
func TestClockOffsetsBetweenMachinesDoNotMatter(t *testing.T) {
	clustertest.Shared(t)
	for i, tc := range []struct {
		name   string
		offset time.Duration
		cut    bool
	}{
		{"holder 30s ahead, killed", 30 * time.Second, false},
		{"holder 30s behind, killed", -30 * time.Second, false},
		{"holder 30s ahead, cut off", 30 * time.Second, true},
		{"holder 30s behind, cut off", -30 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stack := fmt.Sprintf("skew-%d", i)
			start := time.Now()
			holder, waiter := newMachine(t, start, tc.offset), newMachine(t, start, 0)
			tl := &timeline{t: t, machines: []*machine{holder, waiter}}

			holder.take(t, stack, Options{Who: "alice@ahead-or-behind", Operation: "gpuslice apply"})
			waiter.acquire(stack, Options{Who: "bob@desk", Operation: "gpuslice apply", Timeout: time.Hour})
			t.Cleanup(func() {
				if !waiter.pending && waiter.lock != nil {
					waiter.lock.Release(context.Background())
				}
			})

			// Three durations with the holder renewing.
			tl.run(3*DefaultDuration, nil)
			if !holder.holds() || !waiter.pending {
				t.Fatalf("with the holder renewing: holder holds %v (%v), waiter still waiting %v (%v)", holder.holds(), holder.lock.Err(), waiter.pending, waiter.err)
			}

			var lostAt time.Duration
			if tc.cut {
				holder.cut.Store(true)
				if !tl.run(2*DefaultDuration, func() bool { return !holder.holds() }) {
					t.Fatal("a holder cut off from the cluster never gave its lock up")
				}
				lostAt = tl.now
				if err := holder.lock.Err(); err == nil || !strings.Contains(err.Error(), "could not be renewed") {
					t.Errorf("the holder lost its lock with %v", err)
				}
			} else {
				holder.kill()
				lostAt = tl.now
			}
			if !tl.run(2*DefaultDuration, func() bool { return !waiter.pending }) {
				t.Fatal("the waiter never took over the abandoned lock")
			}
			if waiter.err != nil {
				t.Fatal(waiter.err)
			}
			tookAt := waiter.elapsed(waiter.lock.Info().Created)
			prev := waiter.lock.TookOver
			if prev == nil || prev.ID != holder.lock.Info().ID {
				t.Fatalf("TookOver = %+v, want the holder", prev)
			}
			// The lease's renew time is the holder's clock: on the
			// timeline, the last renewal the waiter could see.
			lastRenewal := holder.elapsed(prev.Renewed)
			if d := tookAt - lastRenewal; d < DefaultDuration || d > DefaultDuration+time.Second+step {
				t.Errorf("took over %s after the last renewal, want 15s to 16s", d)
			}
			if tc.cut {
				if margin := tookAt - lostAt; margin < DefaultDuration/3-step {
					t.Errorf("the holder stopped only %s before the waiter took over, want at least %s", margin, DefaultDuration/3)
				}
				if lostAt-lastRenewal > DefaultDuration*2/3+step {
					t.Errorf("the holder stopped %s after its last renewal, want 10s", lostAt-lastRenewal)
				}
			}
		})
	}
}

// A writer that would not wait (no -lock-timeout) is refused at once by a
// lock that looks fresh. One whose holder's last renewal looks older than
// its duration — a holder gone, or one whose clock runs behind — it
// watches for the duration: renewed meanwhile, it is refused; unrenewed,
// it takes it over. The holder's clock decides how long to watch, never
// who writes.
func TestAWriterThatWouldNotWaitWatchesALockThatLooksAbandoned(t *testing.T) {
	clustertest.Shared(t)
	start := time.Now()
	holder := newMachine(t, start, -30*time.Second)
	first, second := newMachine(t, start, 0), newMachine(t, start, 0)
	tl := &timeline{t: t, machines: []*machine{holder, first, second}}
	holder.take(t, "looks-abandoned", Options{Who: "alice@behind", Operation: "gpuslice apply"})

	first.acquire("looks-abandoned", Options{Who: "bob@desk", Operation: "gpuslice apply"})
	if !tl.run(DefaultDuration, func() bool { return !first.pending }) {
		t.Fatal("the writer watched a renewed lock for longer than its duration")
	}
	var held *HeldError
	if !errors.As(first.err, &held) || held.Holder.Who != "alice@behind" || first.told.Load() != 2 {
		t.Fatalf("a writer watching a lock renewed meanwhile: %v (told %d)", first.err, first.told.Load())
	}
	if tl.now > DefaultDuration/3+time.Second+step {
		t.Errorf("refused %s after it started watching, want within a renewal period (5s) and a poll", tl.now)
	}

	holder.kill()
	killed := tl.now
	second.acquire("looks-abandoned", Options{Who: "carol@desk", Operation: "gpuslice apply"})
	if !tl.run(2*DefaultDuration, func() bool { return !second.pending }) {
		t.Fatal("the writer never took over")
	}
	if second.err != nil || second.told.Load() != 2 {
		t.Fatalf("a writer watching an abandoned lock: %v (told %d)", second.err, second.told.Load())
	}
	defer second.lock.Release(context.Background())
	if d := second.elapsed(second.lock.Info().Created) - killed; d < DefaultDuration {
		t.Errorf("took over %s after it started watching, want the whole duration (15s)", d)
	}
}

// A holder cut off from the cluster gives its lock up after 10 s; when the
// connection is back, Release removes the Lease, still its own, so the
// next writer need not watch it for 15 s.
func TestALockLostToFailedRenewalsIsRemovedOnRelease(t *testing.T) {
	clustertest.Shared(t)
	holder := newMachine(t, time.Now(), 0)
	tl := &timeline{t: t, machines: []*machine{holder}}
	holder.take(t, "lost-renewals", Options{Who: "alice@laptop", Operation: "gpuslice apply"})
	holder.cut.Store(true)
	if !tl.run(DefaultDuration, func() bool { return !holder.holds() }) {
		t.Fatal("a holder cut off from the cluster never gave its lock up")
	}
	holder.cut.Store(false)
	if err := holder.lock.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h, err := holder.store.Holder(context.Background(), "lost-renewals"); err != nil || h != nil {
		t.Fatalf("after releasing a lock lost to failed renewals, it is held by %+v (%v)", h, err)
	}
}
