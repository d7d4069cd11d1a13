package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lock is a held lock. Release it when done; Lost is closed if it is lost
// before (taken over, removed by force-unlock, or not renewed in time).
type Lock struct {
	store Store
	stack string
	info  Info
	// TookOver is the holder whose expired lock this one took over.
	TookOver *Info

	mu    sync.Mutex
	lease *coordinationv1.Lease
	// lastRenew is when the last acknowledged write of the lease was sent,
	// by this machine's clock: no waiter can have seen it earlier.
	lastRenew time.Time
	lost      chan struct{}
	lostErr   error
	// taken: the lease is someone else's (taken over, removed), so
	// Release leaves it alone.
	taken    bool
	stop     chan struct{}
	done     chan struct{}
	released bool
}

func (s Store) hold(stack string, mine Info, lease *coordinationv1.Lease, prev *Info) *Lock {
	l := &Lock{store: s, stack: stack, info: mine, TookOver: prev, lease: lease, lastRenew: mine.Renewed,
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.renew()
	return l
}

// Info describes this holder.
func (l *Lock) Info() Info { return l.info }

// Stack is the stack locked.
func (l *Lock) Stack() string { return l.stack }

// Lost is closed when the lock can no longer be trusted; Err says why.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err says why the lock was lost; nil while it is held.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// Context returns a context that is cancelled, with Err as its cause,
// when the lock is lost: the holder's writes stop there.
func (l *Lock) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case <-l.lost:
			cancel(l.Err())
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

func (l *Lock) lose(err error, taken bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr == nil {
		l.lostErr, l.taken = err, taken
		close(l.lost)
	}
}

// renewDeadline is how long after its last acknowledged renewal the
// holder gives the lock up: two thirds of the duration, so it has stopped
// a third of it before any waiter, which counts the whole duration from
// when it saw that renewal, may take over.
func (l *Lock) renewDeadline() time.Duration { return l.info.Duration * 2 / 3 }

// renew renews the lease every third of its duration until Release, and
// declares the lock lost when it has not managed to for renewDeadline.
// Every wait and request is cut at that deadline, so a hung request does
// not carry the holder past it.
func (l *Lock) renew() {
	defer close(l.done)
	clk := l.store.clock()
	period := l.info.Duration / 3
	next := period
	var lastErr error
	for {
		l.mu.Lock()
		last := l.lastRenew
		l.mu.Unlock()
		left := l.renewDeadline() - clk.Since(last)
		if left > 0 {
			t := clk.NewTimer(min(next, left))
			select {
			case <-l.stop:
				t.Stop()
				return
			case <-t.C():
			}
			left = l.renewDeadline() - clk.Since(last)
		}
		if left <= 0 {
			l.lose(fmt.Errorf("lost the state lock of stack %q: it could not be renewed for %s (%v); this writer stops before another may take the lock over, %s after a waiter last saw it renewed",
				l.stack, clk.Since(last).Round(time.Second), lastErr, l.info.Duration), false)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(period, left))
		err := l.renewOnce(ctx)
		cancel()
		var taken *takenError
		switch {
		case err == nil:
			next = period
		case errors.As(err, &taken):
			l.lose(err, true)
			return
		default:
			lastErr = err
			next = time.Second // try again soon: the deadline is coming
		}
	}
}

type takenError struct{ msg string }

func (e *takenError) Error() string { return e.msg }

func (l *Lock) renewOnce(ctx context.Context) error {
	clk := l.store.clock()
	leases := l.store.Client.CoordinationV1().Leases(l.store.Namespace)
	l.mu.Lock()
	next := l.lease.DeepCopy()
	l.mu.Unlock()
	for attempt := 0; ; attempt++ {
		sent := clk.Now()
		next.Spec.RenewTime = &metav1.MicroTime{Time: sent}
		updated, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			l.mu.Lock()
			l.lease, l.lastRenew = updated, sent
			l.mu.Unlock()
			return nil
		}
		if apierrors.IsNotFound(err) {
			return &takenError{fmt.Sprintf("lost the state lock of stack %q: its Lease was removed (gpuslice force-unlock?)", l.stack)}
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return err
		}
		// Conflict: someone else wrote the lease. Still ours?
		cur, err := leases.Get(ctx, Name(l.stack), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return &takenError{fmt.Sprintf("lost the state lock of stack %q: its Lease was removed (gpuslice force-unlock?)", l.stack)}
		}
		if err != nil {
			return err
		}
		if h := infoOf(cur); h.ID != l.info.ID {
			return &takenError{fmt.Sprintf("lost the state lock of stack %q: %s (%s) took it over", l.stack, h.Who, h.Operation)}
		}
		next = cur.DeepCopy()
	}
}

// Release stops renewing and removes the lock, retrying while the API
// server cannot be reached and the renew deadline has not passed. A lock
// taken over or removed is left alone (it is someone else's now); one
// lost because its renewals failed is removed if it is still this
// holder's, so the next writer need not wait for it.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	l.mu.Lock()
	lost, taken := l.lostErr != nil, l.taken
	l.mu.Unlock()
	if lost {
		if !taken {
			l.store.unwind(l.stack, l.info.ID)
		}
		return nil
	}
	clk := l.store.clock()
	leases := l.store.Client.CoordinationV1().Leases(l.store.Namespace)
	var lastErr error
	for {
		l.mu.Lock()
		cur, last := l.lease, l.lastRenew
		l.mu.Unlock()
		err := leases.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			got, gerr := leases.Get(ctx, cur.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) || (gerr == nil && infoOf(got).ID != l.info.ID) {
				return nil // no longer ours to release
			}
			if gerr == nil {
				l.mu.Lock()
				l.lease = got
				l.mu.Unlock()
				continue
			}
			err = gerr
		}
		lastErr = err
		if clk.Since(last)+time.Second > l.renewDeadline() {
			break
		}
		t := clk.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return l.releaseError(context.Cause(ctx))
		case <-t.C():
		}
	}
	return l.releaseError(lastErr)
}

func (l *Lock) releaseError(err error) error {
	return &wrapped{fmt.Sprintf("Error releasing the state lock of stack %q: %v\nThe lock (ID %s) is taken over by the next writer that waits for it once that writer has seen it unrenewed for %s; to remove it sooner, run `gpuslice force-unlock %s`",
		l.stack, err, l.info.ID, l.info.Duration, l.stack), err}
}

// Abandon stops renewing without releasing, as a killed holder would; a
// waiter takes the lock over after its duration. For tests.
func (l *Lock) Abandon() {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return
	}
	l.released = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
}
