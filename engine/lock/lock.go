// Package lock is the per-stack write lock, Terraform's state lock for a
// stack: a coordination.k8s.io/v1 Lease named gpuslice-lock-<stack> in the
// namespace of the stack's inventory. The holder's identity (a random ID;
// who, operation and path in annotations) and its acquire and renew times
// are on the Lease. Acquire, renew, take-over and release are all
// conditional on the Lease's resourceVersion, so two writers can never
// both write it.
//
// No machine trusts another's clock. The times on the Lease are the
// holder's, shown to people and never compared with anyone's now to
// decide expiry. A waiter decides that a lock expired by its own
// monotonic clock, as client-go's leaderelection does with observedTime:
// it takes the lock over once it has watched the Lease's resourceVersion
// stay the same for the lease's duration (15 s). The holder renews every
// third of the duration and, when it could not renew for two thirds of it
// (10 s, timed on its own clock from before it sent its last acknowledged
// write), declares the lock lost: its Lock.Context is cancelled and
// renewal stops. That write reached the server after it was sent, and the
// waiter saw it after that, so the holder stops at least a third of the
// duration (5 s) before any waiter may take over — the margin for the
// writes it has in flight (engine/apply lets them finish; the inventory's
// version catches any that arrives later) and for scheduling delays.
// Clock offsets between machines (±30 s, hours) do not matter; clock
// rates are assumed equal (NTP keeps them within parts per million; the
// margin covers up to a third). A holder whose machine is suspended
// (laptop lid) stops its monotonic clock and resumes writing until its
// next renewal fails, within a third of the duration: the inventory's
// version is what catches those writes.
//
// The holder's RenewTime serves one hint: a writer that would not wait
// (-lock-timeout 0) fails at once when the lease looks fresh, and when it
// looks abandoned (renewed, by the holder's clock, longer ago than its
// duration by this machine's) it watches the lease for a duration and
// takes it over unless it changes. The hint changes how long a writer
// watches, never whether it takes over.
//
// Why not client-go's leaderelection.LeaderElector: its LeaseLock writes
// no annotations (who, operation, path), and a LeaderElectionRecord has
// no room for them; when the Lease is deleted under a leader
// (force-unlock) its renewal creates it again instead of stopping; its
// acquire loop retries until its context ends, with no "held by whom,
// fail now" answer; an acquire cut off mid-write leaves the lease it may
// have stored; it releases by writing an empty holder rather than
// deleting; its clock cannot be injected; and it logs through klog to the
// CLI's stderr. So gpuslice keeps this loop, with leaderelection's
// observed-time rule, and resourcelock's LeaderElectionRecord and its
// conversions for the Lease's spec.
package lock

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/gpuslice/gpuslice/contract"
)

// DefaultDuration is how long a waiter watches a lease unchanged before
// taking it over. The holder renews it every third of it and stops
// writing when it could not for two thirds.
const DefaultDuration = 15 * time.Second

// Name returns the name of a stack's Lease.
func Name(stack string) string { return "gpuslice-lock-" + stack }

// Options configure Acquire.
type Options struct {
	// Who, Operation, Path and Version describe the holder (Who defaults
	// to Me()).
	Who, Operation, Path, Version string
	// Timeout is how long to wait for a lock another writer holds
	// (-lock-timeout); 0 fails at once, unless the lock looks abandoned:
	// then Acquire watches it for its duration whatever the timeout.
	Timeout time.Duration
	// Duration is how long a waiter watches this holder's lease unchanged
	// before taking it over (DefaultDuration when 0; whole seconds, at
	// least one).
	Duration time.Duration
	// Waiting, when set, is told once that Acquire waits, for whom, and
	// whether because the holder looks gone (then it waits for the
	// holder's duration to take the lock over unless it is renewed).
	Waiting func(holder Info, abandoned bool)
}

// Store takes and inspects the locks in one namespace.
type Store struct {
	Client    kubernetes.Interface
	Namespace string
	// Clock is this machine's clock (the real one when nil); every
	// decision about time is taken on it. Tests inject fake ones.
	Clock clock.Clock
}

func (s Store) clock() clock.Clock {
	if s.Clock == nil {
		return clock.RealClock{}
	}
	return s.Clock
}

// HeldError is Acquire's answer when another writer holds the lock.
type HeldError struct {
	Stack  string
	Lease  string
	Holder Info
	Waited time.Duration
	// At is when Acquire gave up, by this machine's clock.
	At time.Time
	// Hint replaces the closing advice (the provider's words differ from
	// the CLI's).
	Hint string
}

func (e *HeldError) Error() string {
	waited := ""
	if e.Waited > 0 {
		waited = fmt.Sprintf(" (waited %s)", e.Waited.Round(time.Second))
	}
	hint := e.Hint
	if hint == "" {
		hint = fmt.Sprintf("gpuslice locks a stack so that two writers never apply it at once. Wait for the holder to finish, or let this command wait for it with -lock-timeout=5m. "+
			"A holder that is gone (killed, crashed) stops renewing: a writer waiting for the lock takes it over once it has seen it unrenewed for %s, and `gpuslice force-unlock %s` removes it at once. "+
			"-lock=false skips locking (not recommended: the writers then only detect each other through the inventory's version).",
			e.Holder.Duration.Round(time.Second), e.Stack)
	}
	return fmt.Sprintf("Error acquiring the state lock: stack %q is locked by %s (%s) since %s%s; Lease %s\n\n%s\n%s",
		e.Stack, e.Holder.Who, e.Holder.Operation, e.Holder.Created.Local().Format(time.RFC3339), waited, e.Lease, e.Holder.Describe(e.At), hint)
}

// Acquire takes the stack's lock, waiting up to opts.Timeout for another
// holder to release it or for its lease to expire (then taking it over).
// A lease expires for this waiter once it has seen its resourceVersion
// unchanged for the lease's duration, by this machine's clock. Cancelling
// ctx abandons the wait. The lock is renewed until Release.
func (s Store) Acquire(ctx context.Context, stack string, opts Options) (*Lock, error) {
	opts = opts.withDefaults()
	clk := s.clock()
	start := clk.Now()
	leases := s.Client.CoordinationV1().Leases(s.Namespace)
	reported := false
	// The lease as last seen, and when it was first seen so: expiry is
	// decided on these alone.
	var seenVersion string
	var seenAt time.Time
	renewed := false // the lease changed while this waiter watched: its holder runs
	for {
		cur, err := leases.Get(ctx, Name(stack), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l, err := s.createLease(ctx, stack, opts, clk)
			if l == nil && err == nil {
				continue // another writer was faster: look again
			}
			return l, err
		case err != nil:
			return nil, s.wrap(stack, "read", err)
		}
		if cur.ResourceVersion != seenVersion {
			// After the read, never before: the version may have been
			// written while the read was on its way.
			renewed = renewed || seenVersion != ""
			seenVersion, seenAt = cur.ResourceVersion, clk.Now()
		}
		holder := infoOf(cur)
		expiry := holder.Duration
		if expiry <= 0 {
			expiry = DefaultDuration // a holder that wrote none: the longest gpuslice uses
		}
		unchanged := clk.Since(seenAt)
		if holder.ID == "" || unchanged >= expiry {
			l, err := s.takeOver(ctx, stack, opts, clk, cur, holder)
			if l == nil && err == nil {
				continue // renewed, released or taken meanwhile: look again
			}
			return l, err
		}
		waited := clk.Since(start)
		abandoned := !renewed && holder.looksAbandoned(clk.Now())
		if waited >= opts.Timeout && !abandoned {
			return nil, &HeldError{Stack: stack, Lease: s.Namespace + "/" + Name(stack), Holder: holder, Waited: waited, At: clk.Now()}
		}
		if !reported && opts.Waiting != nil {
			opts.Waiting(holder, abandoned)
			reported = true
		}
		// Look again within a second (the holder may release it any time),
		// and just after the lease would expire.
		pause := min(time.Second, expiry-unchanged+50*time.Millisecond)
		if !abandoned {
			pause = min(pause, opts.Timeout-waited)
		}
		t := clk.NewTimer(max(pause, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("stopped waiting for the state lock of stack %q, held by %s (%s): %w", stack, holder.Who, holder.Operation, context.Cause(ctx))
		case <-t.C():
		}
	}
}

// withDefaults fills in the options left unset, and holds the lease for
// whole seconds, as a Lease records them.
func (o Options) withDefaults() Options {
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	o.Duration = max(o.Duration.Truncate(time.Second), time.Second)
	if o.Who == "" {
		o.Who = Me()
	}
	return o
}

// createLease takes the stack's lock by creating its Lease; no lock and no
// error when another writer created it first.
func (s Store) createLease(ctx context.Context, stack string, opts Options, clk clock.Clock) (*Lock, error) {
	mine := s.newInfo(opts, clk.Now()) // before the write: the holder's deadline counts from it
	created, err := s.create(ctx, stack, mine)
	if apierrors.IsAlreadyExists(err) {
		return nil, nil
	}
	if err != nil {
		s.unwind(stack, mine.ID)
		return nil, s.wrap(stack, "create", err)
	}
	return s.hold(stack, mine, created, nil), nil
}

// takeOver takes the stack's lock from holder, whose lease cur expired
// (or that holds none); no lock and no error when the lease was renewed,
// released or taken meanwhile.
func (s Store) takeOver(ctx context.Context, stack string, opts Options, clk clock.Clock, cur *coordinationv1.Lease, holder Info) (*Lock, error) {
	mine := s.newInfo(opts, clk.Now())
	taken := cur.DeepCopy()
	setHolder(taken, stack, mine, transitions(cur)+1)
	updated, err := s.Client.CoordinationV1().Leases(s.Namespace).Update(ctx, taken, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		s.unwind(stack, mine.ID)
		return nil, s.wrap(stack, "take over", err)
	}
	var prev *Info
	if holder.ID != "" {
		prev = &holder
	}
	return s.hold(stack, mine, updated, prev), nil
}

func transitions(l *coordinationv1.Lease) int {
	return rl.LeaseSpecToLeaderElectionRecord(&l.Spec).LeaderTransitions
}

// unwind removes the lease Acquire wrote as id when the write failed: a
// write whose answer was lost (ctx cancelled mid-request, as a provider's
// is when Terraform is interrupted, a dropped connection, a server
// timeout) may be stored all the same, and the lock would then stay held
// by nobody until a waiter watched it for its whole duration, failing the
// next apply. Failures are rare, so it reads back after any of them
// rather than sort them. Release uses it too, for a lock lost because
// its renewals failed.
func (s Store) unwind(stack, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leases := s.Client.CoordinationV1().Leases(s.Namespace)
	cur, gerr := leases.Get(ctx, Name(stack), metav1.GetOptions{})
	if gerr != nil || infoOf(cur).ID != id {
		return
	}
	// Conditional, like Release: a lease renewed or taken over since is
	// not ours; if this fails too, the lease expires by itself.
	_ = leases.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}})
}

// Holder returns who holds the stack's lock; nil when nobody does. One
// look cannot tell a running holder from a gone one (that takes watching
// the lease for its duration, which Acquire does): Describe shows the
// holder's last renewal for a person to judge.
func (s Store) Holder(ctx context.Context, stack string) (*Info, error) {
	cur, err := s.Client.CoordinationV1().Leases(s.Namespace).Get(ctx, Name(stack), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap(stack, "read", err)
	}
	info := infoOf(cur)
	if info.ID == "" {
		return nil, nil
	}
	return &info, nil
}

// ForceUnlock removes the stack's lock whoever holds it, and returns the
// holder it removed (nil when the stack was not locked). A holder still
// running notices at its next renewal and stops writing.
func (s Store) ForceUnlock(ctx context.Context, stack string) (*Info, error) {
	leases := s.Client.CoordinationV1().Leases(s.Namespace)
	for {
		cur, err := leases.Get(ctx, Name(stack), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, s.wrap(stack, "read", err)
		}
		info := infoOf(cur)
		err = leases.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}})
		if apierrors.IsConflict(err) {
			continue // renewed meanwhile: remove the current one
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, s.wrap(stack, "delete", err)
		}
		if info.ID == "" {
			return nil, nil
		}
		return &info, nil
	}
}

func (s Store) newInfo(opts Options, now time.Time) Info {
	return Info{ID: randomID(), Who: opts.Who, Operation: opts.Operation, Path: opts.Path, Version: opts.Version,
		Created: now, Renewed: now, Duration: opts.Duration}
}

func (s Store) create(ctx context.Context, stack string, mine Info) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: Name(stack), Namespace: s.Namespace,
		Labels: map[string]string{contract.LabelManagedBy: contract.ManagedBy},
	}}
	setHolder(lease, stack, mine, 0)
	created, err := s.Client.CoordinationV1().Leases(s.Namespace).Create(ctx, lease, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		// The namespace is made by the first apply, like the inventory's.
		_, nsErr := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}, metav1.CreateOptions{})
		if nsErr != nil && !apierrors.IsAlreadyExists(nsErr) {
			return nil, fmt.Errorf("create namespace %s: %w", s.Namespace, nsErr)
		}
		created, err = s.Client.CoordinationV1().Leases(s.Namespace).Create(ctx, lease, metav1.CreateOptions{})
	}
	return created, err
}

func (s Store) wrap(stack, verb string, err error) error {
	return &wrapped{fmt.Sprintf("Error acquiring the state lock: %s Lease %s/%s of stack %q: %v (check the cluster connection and that you may read and write leases in namespace %s; -lock=false skips locking, not recommended)",
		verb, s.Namespace, Name(stack), stack, err, s.Namespace), err}
}

// wrapped is an error whose message starts with Terraform's words
// ("Error acquiring the state lock"), capital letter included.
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
