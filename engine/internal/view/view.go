// Package view is the engine's one view of the cluster. Every read the
// engine makes — plan's live objects and inventories, readback for refresh
// and import, the plan-time checks, capacity, a workload's status and the
// waits — is served by client-go informers that the view starts on first
// use, one per Resource (a kind and the part of the cluster it covers, by
// label or field selector), kept current by their watches once the run
// needs them (see Fresh per run). A Terraform run
// (one provider process) or a CLI command therefore lists each kind once
// however many resources it plans, and `gpuslice reconcile` keeps one view
// across its rounds.
//
// Two rules keep it correct:
//
//   - Read your writes. Every write the engine's clients send is reported
//     (kube.Write) and becomes a barrier: a later read of that resource
//     waits until its informer has seen the answer's resourceVersion, or
//     the deletion. A resource applied in a run is what the resources
//     planned after it see.
//   - Fresh per run. A view starts empty, so its first read of a kind
//     lists it as of now. A run that only reads (a plan) opens no watch
//     and reads the cluster as of its lists: one request per informer.
//     Once the run writes, waits for changes or is told to Follow, every
//     informer watches from its list on, and out-of-band changes arrive
//     within the watch's latency. Reset starts over, as a new process
//     would.
//
// A namespaced kind is read one namespace at a time, in the namespaces a
// run names (WarmIn, or its first read there), so a run's cost does not
// grow with other tenants' objects; only a resource marked ClusterWide,
// which a check needs from every namespace, is read across them all — and
// without the right to, per namespace read.
//
// The kinds client-go's scheme knows (all but custom resources) are listed
// and watched as protobuf and kept as their client-go type: decoding them
// costs a fraction of JSON into maps, and they take a fraction of the
// memory. Live converts one to unstructured when plan asks for it.
package view

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// View is one engine's cache of the cluster. It is safe for concurrent use.
type View struct {
	client dynamic.Interface
	// config, when set, builds the protobuf clients of the kinds
	// client-go's scheme knows; without it every kind is read through
	// client (the fake dynamic client of small tests).
	config *rest.Config
	rest   map[schema.GroupVersion]rest.Interface // by v.mu

	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelFunc
	closed   bool
	entries  map[entryKey]*entry
	barriers map[schema.GroupResource][]barrier
	seq      uint64 // of the last barrier
	// follow is closed once this generation's informers watch (Follow);
	// until then each has only listed.
	follow    chan struct{}
	following bool
	// wg counts the goroutines of this generation's informers; Reset and
	// Close wait for them.
	wg      *sync.WaitGroup
	running atomic.Int64

	subsMu sync.Mutex
	subs   map[chan struct{}]struct{}

	typesState typesState
}

// New returns a view reading through client, and through clients built
// from config (nil for none) the kinds client-go's scheme knows; nothing is
// read until asked.
func New(client dynamic.Interface, config *rest.Config) *View {
	v := &View{client: client, config: config, rest: map[schema.GroupVersion]rest.Interface{}, subs: map[chan struct{}]struct{}{},
		typesState: typesState{docs: map[string]*fetch[*gvTypes]{}}}
	v.reset()
	return v
}

func (v *View) reset() {
	v.ctx, v.cancel = context.WithCancel(context.Background())
	v.entries = map[entryKey]*entry{}
	v.barriers = map[schema.GroupResource][]barrier{}
	v.wg = &sync.WaitGroup{}
	v.follow, v.following = make(chan struct{}), false
}

// Follow makes the view's informers watch, those listed so far from their
// lists on and those started later at once, until Reset: changes made by
// others arrive within the watch's latency. A run that writes (Observe)
// or waits for changes (Subscribe) follows by itself; a loop that reads
// the same view round after round (gpuslice reconcile) calls it.
func (v *View) Follow() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.followLocked()
}

// followLocked is Follow; v.mu is held.
func (v *View) followLocked() {
	if !v.following {
		close(v.follow)
		v.following = true
	}
}

// Reset stops every informer and waits until they have stopped: the next
// read lists the cluster afresh, as a new process would. Reads running
// meanwhile may fail; call it between runs.
func (v *View) Reset() {
	v.mu.Lock()
	v.cancel()
	stopped := v.wg
	v.reset()
	v.mu.Unlock()
	stopped.Wait()
	v.resetTypes()
}

// Close stops every informer and returns once their goroutines have
// ended; reads fail afterwards.
func (v *View) Close() {
	v.mu.Lock()
	v.cancel()
	v.closed = true
	stopped := v.wg
	v.mu.Unlock()
	stopped.Wait()
}

// Running says how many goroutines the view's informers run: none once
// Close has returned.
func (v *View) Running() int { return int(v.running.Load()) }

// goroutine runs f as one of the current generation's goroutines; v.mu is
// held.
func (v *View) goroutine(f func()) {
	wg := v.wg
	wg.Add(1)
	v.running.Add(1)
	go func() {
		defer wg.Done()
		defer v.running.Add(-1)
		f()
	}()
}

// Started says how many informers run: what a run's reads cost.
func (v *View) Started() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.entries)
}

var errClosed = errors.New("the engine was closed; create a new one")
