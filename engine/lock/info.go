package lock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The holder as the Lease records it, and as people read it.

// Annotations on the Lease describing the holder.
const (
	annotationStack     = "gpuslice.dev/stack"
	annotationWho       = "gpuslice.dev/lock-who"
	annotationOperation = "gpuslice.dev/lock-operation"
	annotationPath      = "gpuslice.dev/lock-path"
	annotationVersion   = "gpuslice.dev/lock-version"
)

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
	// Created is when the holder acquired the lock, Renewed its last
	// renewal, both by the holder's clock: for people, never for deciding
	// expiry.
	Created, Renewed time.Time
	// Duration is how long a waiter watches the lease unchanged before it
	// takes it over.
	Duration time.Duration
}

// Describe is the "Lock Info" block of an error message; now is this
// machine's time, which the holder's times are shown against.
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
	s += fmt.Sprintf("  Since:     %s (%s)\n", i.Created.Local().Format(time.RFC3339), ago(now, i.Created))
	s += fmt.Sprintf("  Renewed:   %s (%s), every %s while the holder runs; a writer waiting for the lock takes it over after seeing it unrenewed for %s\n",
		i.Renewed.Local().Format(time.RFC3339), ago(now, i.Renewed), (i.Duration / 3).Round(time.Second), i.Duration.Round(time.Second))
	return s
}

// ago says how long before now t was, by two clocks.
func ago(now, t time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return fmt.Sprintf("in %s by this machine's clock: the holder's runs ahead", -d)
	}
	return fmt.Sprintf("%s ago by this machine's clock", d)
}

// looksAbandoned is the one use of the holder's clock: its last renewal
// looks older than its duration. A hint for how long to watch, never a
// reason to take over.
func (i Info) looksAbandoned(now time.Time) bool { return now.Sub(i.Renewed) > i.Duration }

// Me returns user@host for this process, as a lock's Who.
func Me() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// setHolder writes i as the lease's holder: the spec through
// resourcelock's record, the rest in annotations.
func setHolder(l *coordinationv1.Lease, stack string, i Info, transitions int) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annotationStack] = stack
	l.Annotations[annotationWho] = i.Who
	l.Annotations[annotationOperation] = i.Operation
	l.Annotations[annotationPath] = i.Path
	l.Annotations[annotationVersion] = i.Version
	l.Spec = rl.LeaderElectionRecordToLeaseSpec(&rl.LeaderElectionRecord{
		HolderIdentity:       i.ID,
		LeaseDurationSeconds: int(i.Duration / time.Second),
		AcquireTime:          metav1.Time{Time: i.Created},
		RenewTime:            metav1.Time{Time: i.Renewed},
		LeaderTransitions:    transitions,
	})
}

func infoOf(l *coordinationv1.Lease) Info {
	r := rl.LeaseSpecToLeaderElectionRecord(&l.Spec)
	a := l.Annotations
	i := Info{ID: r.HolderIdentity, Who: a[annotationWho], Operation: a[annotationOperation], Path: a[annotationPath], Version: a[annotationVersion],
		Created: r.AcquireTime.Time, Renewed: r.RenewTime.Time, Duration: time.Duration(r.LeaseDurationSeconds) * time.Second}
	if i.Renewed.IsZero() {
		i.Renewed = i.Created
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
