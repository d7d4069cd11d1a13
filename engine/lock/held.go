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
// before (taken over after a renewal failure, or removed by force-unlock).
type Lock struct {
	store Store
	stack string
	info  Info
	// TookOver is the holder whose expired lock this one took over.
	TookOver *Info

	mu        sync.Mutex
	lease     *coordinationv1.Lease
	lastRenew time.Time
	lost      chan struct{}
	lostErr   error
	stop      chan struct{}
	done      chan struct{}
	released  bool
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
// when the lock is lost.
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

func (l *Lock) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr == nil {
		l.lostErr = err
		close(l.lost)
	}
}

// renew renews the lease every third of its duration until Release. When
// renewals fail for two thirds of it, the lock is declared lost: the lease
// expires for other writers only a third later, so this holder has stopped
// before anyone else may start.
func (l *Lock) renew() {
	defer close(l.done)
	period := l.info.Duration / 3
	next := period
	for {
		select {
		case <-l.stop:
			return
		case <-time.After(next):
		}
		ctx, cancel := context.WithTimeout(context.Background(), period)
		err := l.renewOnce(ctx)
		cancel()
		var taken *takenError
		switch {
		case err == nil:
			next = period
		case errors.As(err, &taken):
			l.lose(err)
			return
		default:
			l.mu.Lock()
			since := time.Since(l.lastRenew)
			l.mu.Unlock()
			if since > l.info.Duration*2/3 {
				l.lose(fmt.Errorf("lost the state lock of stack %q: it could not be renewed for %s (%v), and another writer may take it over once it expires", l.stack, since.Round(time.Second), err))
				return
			}
			next = time.Second // try again soon: the lease is running out
		}
	}
}

type takenError struct{ msg string }

func (e *takenError) Error() string { return e.msg }

func (l *Lock) renewOnce(ctx context.Context) error {
	leases := l.store.Client.CoordinationV1().Leases(l.store.Namespace)
	l.mu.Lock()
	next := l.lease.DeepCopy()
	l.mu.Unlock()
	for attempt := 0; ; attempt++ {
		now := time.Now()
		next.Spec.RenewTime = &metav1.MicroTime{Time: now}
		updated, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			l.mu.Lock()
			l.lease, l.lastRenew = updated, now
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
// server cannot be reached and the lease has not expired anyway. A lock
// already lost is not removed (it is someone else's now).
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
	if l.Err() != nil {
		return nil
	}
	leases := l.store.Client.CoordinationV1().Leases(l.store.Namespace)
	var lastErr error
	for {
		l.mu.Lock()
		cur, deadline := l.lease, l.lastRenew.Add(l.info.Duration)
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
		if time.Now().Add(time.Second).After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return l.releaseError(context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
	return l.releaseError(lastErr)
}

func (l *Lock) releaseError(err error) error {
	l.mu.Lock()
	expires := l.lastRenew.Add(l.info.Duration)
	l.mu.Unlock()
	return &wrapped{fmt.Sprintf("Error releasing the state lock of stack %q: %v\nThe lock (ID %s) expires by itself at %s; to remove it sooner, run `gpuslice force-unlock %s`",
		l.stack, err, l.info.ID, expires.Local().Format(time.RFC3339), l.stack), err}
}

// Abandon stops renewing without releasing, as a killed holder would; the
// lock expires after its duration. For tests.
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
