package view

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/gpuslice/gpuslice/engine/kube"
)

// barrierTimeout bounds how long a read waits for its informer to show a
// write; the watch delivers within milliseconds unless it is broken.
const barrierTimeout = time.Minute

// barrier is a write the engine made: reads of its resource wait until the
// informer shows it.
type barrier struct {
	seq uint64
	w   kube.Write
}

// Observe records a write (kube.Clients.OnWrite calls it).
func (v *View) Observe(w kube.Write) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.followLocked() // the reads after a write wait for the watch to show it
	if w.ResourceVersion == "" && !w.Deleted {
		return
	}
	v.seq++
	v.barriers[w.Resource] = append(v.barriers[w.Resource], barrier{seq: v.seq, w: w})
}

// settle waits until e shows every write made since it last settled that
// falls within its selectors.
func (v *View) settle(ctx context.Context, e *entry) error {
	gr := e.key.res.GVR.GroupResource()
	v.mu.Lock()
	seq := v.seq
	var pending []barrier
	e.mu.Lock()
	for _, b := range v.barriers[gr] {
		if b.seq > e.settled {
			pending = append(pending, b)
		}
	}
	e.mu.Unlock()
	v.mu.Unlock()
	for _, b := range pending {
		if !applies(e, b.w) {
			continue
		}
		if err := wait(ctx, e, b.w); err != nil {
			return err
		}
	}
	e.mu.Lock()
	if seq > e.settled {
		e.settled = seq
	}
	e.mu.Unlock()
	v.prune(gr)
	return nil
}

// applies says whether a write can show in e: its namespace, its name
// where e selects by name, and (unless a deletion, which must vanish from
// any scope) its labels.
func applies(e *entry, w kube.Write) bool {
	if e.key.namespace != "" && e.key.namespace != w.Namespace {
		return false
	}
	if f := e.key.res.Fields; f != "" && !metadataMatches(f, w) {
		return false
	}
	return w.Deleted || e.selector.Matches(labels.Set(w.Labels))
}

// metadataMatches says whether a write falls within a field selector of
// metadata.name and metadata.namespace; false for a selector of any other
// field (the engine writes none of the resources it selects so: slices,
// events).
func metadataMatches(selector string, w kube.Write) bool {
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return false
	}
	for _, r := range sel.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return false
		}
	}
	return sel.Matches(fields.Set{"metadata.name": w.Name, "metadata.namespace": w.Namespace})
}

func wait(ctx context.Context, e *entry, w kube.Write) error {
	timeout := time.NewTimer(barrierTimeout)
	defer timeout.Stop()
	// A resourceVersion reached without an event (a bookmark) is seen on
	// the next tick.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		changed := e.changes()
		if shows(e, w) {
			return nil
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to show %s: %w", e.what(), name(w), ctx.Err())
		case <-timeout.C:
			return fmt.Errorf("the watch of %s has not shown %s (resourceVersion %s) after %s: the API server's watch is behind or broken; retry, and check the API server's health",
				e.what(), name(w), w.ResourceVersion, barrierTimeout)
		}
	}
}

// shows says whether e's store reflects the write.
func shows(e *entry, w kube.Write) bool {
	obj, exists, _ := e.informer.GetIndexer().GetByKey(key(w))
	rv := ""
	if exists {
		if m, err := meta.Accessor(obj); err == nil {
			rv = m.GetResourceVersion()
		}
	}
	if w.Deleted {
		if !exists {
			return true
		}
		if w.ResourceVersion == "" {
			return false
		}
		c, ok := compare(rv, w.ResourceVersion)
		return !ok || c > 0 || (w.Terminating && c == 0)
	}
	if exists {
		c, ok := compare(rv, w.ResourceVersion)
		return !ok || c >= 0
	}
	// Gone from this scope since (deleted, or its labels changed): the
	// informer has passed the write when its resourceVersion has.
	c, ok := compare(e.informer.LastSyncResourceVersion(), w.ResourceVersion)
	return ok && c >= 0
}

// compare orders two resourceVersions; ok is false when either is not the
// API server's integer form (then nothing can be waited for).
func compare(a, b string) (int, bool) {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return c, err == nil
}

func key(w kube.Write) string {
	if w.Namespace != "" {
		return w.Namespace + "/" + w.Name
	}
	return w.Name
}

func name(w kube.Write) string {
	return w.Resource.String() + " " + key(w)
}

// prune drops the barriers every informer of gr has passed.
func (v *View) prune(gr schema.GroupResource) {
	v.mu.Lock()
	defer v.mu.Unlock()
	low := v.seq
	for k, e := range v.entries {
		if k.res.GVR.GroupResource() != gr {
			continue
		}
		select {
		case <-e.ready:
			if e.err != nil {
				continue
			}
		default:
		}
		e.mu.Lock()
		low = min(low, e.settled)
		e.mu.Unlock()
	}
	bs := v.barriers[gr]
	i := 0
	for i < len(bs) && bs[i].seq <= low {
		i++
	}
	if i > 0 {
		v.barriers[gr] = append([]barrier(nil), bs[i:]...)
	}
}
