// Package lock is the per-stack write lock, Terraform's state lock for a
// stack: a coordination.k8s.io/v1 Lease named gpuslice-lock-<stack> in the
// namespace of the stack's inventory. The holder's identity (a random ID;
// who, operation and path in annotations) and its acquire and renew times
// are on the Lease; the holder renews it every third of its duration while
// it runs, and another writer takes it over only once it has expired (a
// holder that crashed or was killed). Acquire, renew, take-over and release
// are all conditional on the Lease's resourceVersion, so two writers can
// never both believe they hold it. A holder that cannot renew stops before
// the lease could expire for anyone else (Lost).
package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
)

// DefaultDuration is how long a lock outlives its holder's last renewal.
const DefaultDuration = 15 * time.Second

// Annotations on the Lease describing the holder.
const (
	annotationStack     = "gpuslice.dev/stack"
	annotationWho       = "gpuslice.dev/lock-who"
	annotationOperation = "gpuslice.dev/lock-operation"
	annotationPath      = "gpuslice.dev/lock-path"
	annotationVersion   = "gpuslice.dev/lock-version"
)

// Name returns the name of a stack's Lease.
func Name(stack string) string { return "gpuslice-lock-" + stack }

// Info describes a lock holder, like Terraform's "Lock Info".
type Info struct {
	// ID is the Lease's holderIdentity, unique per acquisition.
	ID string
	// Who is user@host.
	Who string
	// Operation is what the holder runs, e.g. "gpuslice apply".
	Operation string
	// Path is the configuration directory or resource the holder applies.
	Path    string
	Version string
	// Created is when the holder acquired the lock, Renewed its last renewal.
	Created, Renewed time.Time
	Duration         time.Duration
}

// Expires is when the lock expires unless its holder renews it.
func (i Info) Expires() time.Time { return i.Renewed.Add(i.Duration) }

// Describe is the "Lock Info" block of an error message.
func (i Info) Describe(now time.Time) string {
	s := "Lock Info:\n" +
		"  ID:        " + i.ID + "\n" +
		"  Holder:    " + i.Who + "\n" +
		"  Operation: " + i.Operation + "\n"
	if i.Path != "" {
		s += "  Path:      " + i.Path + "\n"
	}
	if i.Version != "" {
		s += "  Version:   " + i.Version + "\n"
	}
	s += fmt.Sprintf("  Since:     %s (%s ago)\n", i.Created.Local().Format(time.RFC3339), now.Sub(i.Created).Round(time.Second))
	if left := i.Expires().Sub(now); left > 0 {
		s += fmt.Sprintf("  Expires:   in %s unless the holder renews it (it does every %s while it runs)\n", left.Round(time.Second), (i.Duration / 3).Round(time.Second))
	} else {
		s += fmt.Sprintf("  Expired:   %s ago (last renewed %s)\n", (-left).Round(time.Second), i.Renewed.Local().Format(time.RFC3339))
	}
	return s
}

// Me returns user@host for this process, as a lock's Who.
func Me() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// Options configure Acquire.
type Options struct {
	// Who, Operation, Path and Version describe the holder (Who defaults
	// to Me()).
	Who, Operation, Path, Version string
	// Timeout is how long to wait for a lock another writer holds
	// (-lock-timeout); 0 fails at once.
	Timeout time.Duration
	// Duration is how long the lock outlives the last renewal
	// (DefaultDuration when 0); it is renewed every third of it.
	Duration time.Duration
	// Waiting, when set, is told once that Acquire waits, and for whom.
	Waiting func(holder Info)
}

// Store takes and inspects the locks in one namespace.
type Store struct {
	Client    kubernetes.Interface
	Namespace string
}

// HeldError is Acquire's answer when another writer holds the lock.
type HeldError struct {
	Stack  string
	Lease  string
	Holder Info
	Waited time.Duration
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
			"A holder that is gone (killed, crashed) stops renewing and its lock expires %s after the last renewal; `gpuslice force-unlock %s` removes it at once. "+
			"-lock=false skips locking (not recommended: the writers then only detect each other through the inventory's version).",
			e.Holder.Duration.Round(time.Second), e.Stack)
	}
	return fmt.Sprintf("Error acquiring the state lock: stack %q is locked by %s (%s) since %s%s; Lease %s\n\n%s\n%s",
		e.Stack, e.Holder.Who, e.Holder.Operation, e.Holder.Created.Local().Format(time.RFC3339), waited, e.Lease, e.Holder.Describe(time.Now()), hint)
}

// Acquire takes the stack's lock, waiting up to opts.Timeout for another
// holder to release it or for its lease to expire (then taking it over).
// Cancelling ctx abandons the wait. The lock is renewed until Release.
func (s Store) Acquire(ctx context.Context, stack string, opts Options) (*Lock, error) {
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	if opts.Who == "" {
		opts.Who = Me()
	}
	start := time.Now()
	leases := s.Client.CoordinationV1().Leases(s.Namespace)
	reported := false
	for {
		now := time.Now()
		mine := s.newInfo(opts, now)
		cur, err := leases.Get(ctx, Name(stack), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, err := s.create(ctx, stack, mine)
			if apierrors.IsAlreadyExists(err) {
				continue // another writer was faster: look again
			}
			if err != nil {
				s.unwind(stack, mine.ID)
				return nil, s.wrap(stack, "create", err)
			}
			return s.hold(stack, mine, created, nil), nil
		case err != nil:
			return nil, s.wrap(stack, "read", err)
		}
		holder := infoOf(cur)
		if holder.ID == "" || now.After(holder.Expires()) {
			taken := cur.DeepCopy()
			setHolder(taken, stack, mine)
			taken.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
			updated, err := leases.Update(ctx, taken, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue // renewed, released or taken meanwhile: look again
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
		waited := time.Since(start)
		if waited >= opts.Timeout {
			return nil, &HeldError{Stack: stack, Lease: s.Namespace + "/" + Name(stack), Holder: holder, Waited: waited}
		}
		if !reported && opts.Waiting != nil {
			opts.Waiting(holder)
			reported = true
		}
		// Look again within a second: the holder may release it any time.
		pause := min(time.Second, opts.Timeout-waited, time.Until(holder.Expires())+50*time.Millisecond)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped waiting for the state lock of stack %q, held by %s (%s): %w", stack, holder.Who, holder.Operation, context.Cause(ctx))
		case <-time.After(max(pause, 10*time.Millisecond)):
		}
	}
}

// unwind removes the lease Acquire wrote as id when the write failed: a
// write whose answer was lost (ctx cancelled mid-request, as a provider's
// is when Terraform is interrupted, a dropped connection, a server
// timeout) may be stored all the same, and the lock would then stay held
// by nobody for its whole duration, failing the next apply. Failures are
// rare, so it reads back after any of them rather than sort them.
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

// Holder returns who holds the stack's lock; nil when nobody does (or
// the last holder's lease expired: then expired is true).
func (s Store) Holder(ctx context.Context, stack string) (holder *Info, expired bool, err error) {
	cur, err := s.Client.CoordinationV1().Leases(s.Namespace).Get(ctx, Name(stack), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.wrap(stack, "read", err)
	}
	info := infoOf(cur)
	if info.ID == "" {
		return nil, false, nil
	}
	return &info, time.Now().After(info.Expires()), nil
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
		Created: now, Renewed: now, Duration: opts.Duration.Truncate(time.Second)}
}

func (s Store) create(ctx context.Context, stack string, mine Info) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: Name(stack), Namespace: s.Namespace,
		Labels: map[string]string{contract.LabelManagedBy: contract.ManagedBy},
	}}
	setHolder(lease, stack, mine)
	lease.Spec.LeaseTransitions = ptr.To[int32](0)
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

func setHolder(l *coordinationv1.Lease, stack string, i Info) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annotationStack] = stack
	l.Annotations[annotationWho] = i.Who
	l.Annotations[annotationOperation] = i.Operation
	l.Annotations[annotationPath] = i.Path
	l.Annotations[annotationVersion] = i.Version
	l.Spec.HolderIdentity = ptr.To(i.ID)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(i.Duration / time.Second))
	l.Spec.AcquireTime = &metav1.MicroTime{Time: i.Created}
	l.Spec.RenewTime = &metav1.MicroTime{Time: i.Renewed}
}

func infoOf(l *coordinationv1.Lease) Info {
	a := l.Annotations
	i := Info{ID: ptr.Deref(l.Spec.HolderIdentity, ""), Who: a[annotationWho], Operation: a[annotationOperation], Path: a[annotationPath], Version: a[annotationVersion],
		Duration: time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second}
	if l.Spec.AcquireTime != nil {
		i.Created = l.Spec.AcquireTime.Time
	}
	i.Renewed = i.Created
	if l.Spec.RenewTime != nil {
		i.Renewed = l.Spec.RenewTime.Time
	}
	return i
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// String is for logs: the holder and its ID.
func (i Info) String() string {
	return i.Who + " (" + i.Operation + ", lock ID " + i.ID + ", since " + i.Created.Local().Format(time.RFC3339) + ")"
}
