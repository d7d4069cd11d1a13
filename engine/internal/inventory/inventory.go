// Package inventory records which objects a stack has applied, in a
// ConfigMap per stack, so that objects removed from the configuration are
// pruned — and nothing else. Apply records the union of old and new objects
// before it changes anything and the new set after pruning, so an apply
// interrupted at any point leaves no object unaccounted for.
//
// Every write is conditional on the version (resourceVersion) the writer
// read, like Kubernetes' optimistic concurrency: of two writers that
// planned against one version, only the first may record its apply, and
// the other learns it before changing anything (Write) or, if it already
// had started, at once (Fence).
package inventory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/plan"
)

// DefaultNamespace holds inventories unless told otherwise.
const DefaultNamespace = "gpuslice-system"

const dataKey = "objects"

// Name returns the ConfigMap name of a stack's inventory.
func Name(stack string) string { return "gpuslice-inventory-" + stack }

// Store reads and writes inventories in one namespace.
type Store struct {
	Client    kubernetes.Interface
	Namespace string
	// Reader, when set, answers Load instead of a GET (the engine's view,
	// which shows every Save at once).
	Reader func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

func (s Store) get(ctx context.Context, stack string) (*corev1.ConfigMap, error) {
	if s.Reader != nil {
		return s.Reader(ctx, s.Namespace, Name(stack))
	}
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, Name(stack), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cm, err
}

// Load returns the refs recorded for stack; none when the stack was never
// applied.
func (s Store) Load(ctx context.Context, stack string) ([]objects.Ref, error) {
	rec, err := s.Read(ctx, stack)
	return rec.Refs, err
}

// Record is a stack's inventory as read.
type Record struct {
	Refs []objects.Ref
	// Version is the ConfigMap's resourceVersion, on which the next write
	// is conditional; "" when the stack has no inventory yet.
	Version string
	// Last is who wrote it and from what.
	Last plan.Writer
}

// Read returns the stack's inventory with its version.
func (s Store) Read(ctx context.Context, stack string) (Record, error) {
	cm, err := s.get(ctx, stack)
	if err != nil {
		return Record{}, fmt.Errorf("read inventory %s/%s: %w", s.Namespace, Name(stack), err)
	}
	if cm == nil {
		return Record{}, nil
	}
	return s.record(cm)
}

func (s Store) record(cm *corev1.ConfigMap) (Record, error) {
	rec := Record{Version: cm.ResourceVersion, Last: writerOf(cm.Annotations)}
	for _, line := range strings.Split(cm.Data[dataKey], "\n") {
		if line == "" {
			continue
		}
		ref, err := objects.ParseKey(line)
		if err != nil {
			return Record{}, fmt.Errorf("inventory %s/%s is damaged: %w (delete it only if you know the stack's objects; they would no longer be pruned)", s.Namespace, cm.Name, err)
		}
		rec.Refs = append(rec.Refs, ref)
	}
	return rec, nil
}

// ConflictError says the inventory was not the version a write was
// conditional on: another writer wrote it (By) or removed it.
type ConflictError struct {
	Stack string
	// By is who wrote the inventory last, when known.
	By  plan.Writer
	Err error
}

func (e *ConflictError) Error() string {
	by := "another writer"
	if e.By.Who != "" {
		by = fmt.Sprintf("%s at %s", e.By.Who, e.By.At.Local().Format(time.RFC3339))
	}
	return fmt.Sprintf("the inventory of stack %q was written by %s in the meantime (%v)", e.Stack, by, e.Err)
}

func (e *ConflictError) Unwrap() error { return e.Err }

// Write records refs as the stack's inventory if it is still at version
// ("" means it must not exist yet), and returns the new version. When
// another writer got there first it changes nothing and returns a
// *ConflictError.
func (s Store) Write(ctx context.Context, stack string, refs []objects.Ref, version string, w plan.Writer) (string, error) {
	keys := make([]string, 0, len(refs))
	seen := map[string]bool{}
	for _, r := range refs {
		if k := r.Key(); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(stack), Namespace: s.Namespace, ResourceVersion: version,
			Labels: objects.OwnedLabels(stack), Annotations: writerAnnotations(w),
		},
		Data: map[string]string{dataKey: strings.Join(keys, "\n")},
	}
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	var out *corev1.ConfigMap
	var err error
	if version == "" {
		out, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: objects.FieldManager})
		if apierrors.IsNotFound(err) {
			if err := s.ensureNamespace(ctx); err != nil {
				return "", err
			}
			out, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: objects.FieldManager})
		}
	} else {
		out, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: objects.FieldManager})
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || (version != "" && apierrors.IsNotFound(err)) {
		conflict := &ConflictError{Stack: stack, Err: err}
		if cur, gerr := cms.Get(ctx, Name(stack), metav1.GetOptions{}); gerr == nil {
			conflict.By = writerOf(cur.Annotations)
		}
		return "", conflict
	}
	if err != nil {
		return "", fmt.Errorf("write inventory %s/%s: %w", s.Namespace, Name(stack), err)
	}
	return out.ResourceVersion, nil
}

// AddMissing adds to the stack's inventory those of refs it lacks,
// whatever its version: what a writer that lost a conflict did must not
// go unrecorded (it would never be pruned). It only ever adds.
func (s Store) AddMissing(ctx context.Context, stack string, refs []objects.Ref, w plan.Writer) error {
	for attempt := 0; attempt < 10; attempt++ {
		rec, err := s.Read(ctx, stack)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, r := range rec.Refs {
			have[r.Key()] = true
		}
		missing := 0
		all := append([]objects.Ref(nil), rec.Refs...)
		for _, r := range refs {
			if !have[r.Key()] {
				have[r.Key()] = true
				all = append(all, r)
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		if rec.Version != "" {
			w = rec.Last // the record stays the other writer's
		}
		_, err = s.Write(ctx, stack, all, rec.Version, w)
		var conflict *ConflictError
		if !errors.As(err, &conflict) {
			return err
		}
	}
	return fmt.Errorf("record objects in inventory %s/%s: it keeps changing; run plan to see the stack's state", s.Namespace, Name(stack))
}

// Fence watches the stack's inventory from version on: the channel
// receives a *ConflictError as soon as another writer writes or removes it
// (a watch, so a writer that lost stops within milliseconds). It ends with
// ctx.
func (s Store) Fence(ctx context.Context, stack, version string) <-chan error {
	out := make(chan error, 1)
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	lost := func(cm *corev1.ConfigMap, why string) {
		c := &ConflictError{Stack: stack, Err: errors.New(why)}
		if cm != nil {
			c.By = writerOf(cm.Annotations)
		}
		out <- c
	}
	go func() {
		for ctx.Err() == nil {
			w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + Name(stack), ResourceVersion: version})
			if err == nil {
				for ev := range w.ResultChan() {
					cm, _ := ev.Object.(*corev1.ConfigMap)
					switch {
					case ev.Type == watch.Deleted:
						w.Stop()
						lost(cm, "it was deleted")
						return
					case ev.Type == watch.Modified && cm != nil && cm.ResourceVersion != version:
						w.Stop()
						lost(cm, "resourceVersion "+version+" became "+cm.ResourceVersion)
						return
					}
				}
				w.Stop()
			}
			// The watch ended or could not start (an outage, an expired
			// version): read the inventory itself before watching again.
			cm, err := cms.Get(ctx, Name(stack), metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				lost(nil, "it was deleted")
				return
			case err == nil && cm.ResourceVersion != version:
				lost(cm, "resourceVersion "+version+" became "+cm.ResourceVersion)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return out
}

// Annotations on the inventory recording the last writer.
const (
	annotationWriter     = "gpuslice.dev/applied-by"
	annotationAt         = "gpuslice.dev/applied-at"
	annotationConfigTime = "gpuslice.dev/config-time"
	annotationDigest     = "gpuslice.dev/config-digest"
	annotationComplete   = "gpuslice.dev/complete"
)

func writerAnnotations(w plan.Writer) map[string]string {
	a := map[string]string{annotationWriter: w.Who, annotationDigest: w.Digest, annotationComplete: strconv.FormatBool(w.Complete)}
	if !w.At.IsZero() {
		a[annotationAt] = w.At.UTC().Format(time.RFC3339Nano)
	}
	if !w.ConfigTime.IsZero() {
		a[annotationConfigTime] = w.ConfigTime.UTC().Format(time.RFC3339Nano)
	}
	return a
}

func writerOf(a map[string]string) plan.Writer {
	w := plan.Writer{Who: a[annotationWriter], Digest: a[annotationDigest], Complete: a[annotationComplete] != "false"}
	w.At, _ = time.Parse(time.RFC3339Nano, a[annotationAt])
	w.ConfigTime, _ = time.Parse(time.RFC3339Nano, a[annotationConfigTime])
	return w
}

// Delete removes the stack's inventory (after destroy). A version other
// than "" makes it conditional: a *ConflictError when another writer wrote
// it since.
func (s Store) Delete(ctx context.Context, stack string, version ...string) error {
	opts := metav1.DeleteOptions{}
	if len(version) > 0 && version[0] != "" {
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &version[0]}
	}
	err := s.Client.CoreV1().ConfigMaps(s.Namespace).Delete(ctx, Name(stack), opts)
	if apierrors.IsConflict(err) {
		return &ConflictError{Stack: stack, Err: err}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete inventory %s/%s: %w", s.Namespace, Name(stack), err)
	}
	return nil
}

func (s Store) ensureNamespace(ctx context.Context) error {
	_, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create inventory namespace %s: %w", s.Namespace, err)
	}
	return nil
}
