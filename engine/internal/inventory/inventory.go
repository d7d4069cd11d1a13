// Package inventory records which objects a stack has applied, in a
// ConfigMap per stack, so that objects removed from the configuration are
// pruned — and nothing else. Apply records the union of old and new objects
// before it changes anything and the new set after pruning, so an apply
// interrupted at any point leaves no object unaccounted for.
package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/engine/internal/objects"
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
	cm, err := s.get(ctx, stack)
	if err != nil {
		return nil, fmt.Errorf("read inventory %s/%s: %w", s.Namespace, Name(stack), err)
	}
	if cm == nil {
		return nil, nil
	}
	var refs []objects.Ref
	for _, line := range strings.Split(cm.Data[dataKey], "\n") {
		if line == "" {
			continue
		}
		ref, err := objects.ParseKey(line)
		if err != nil {
			return nil, fmt.Errorf("inventory %s/%s is damaged: %w (delete it only if you know the stack's objects; they would no longer be pruned)", s.Namespace, Name(stack), err)
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

// Save records refs as the stack's inventory, creating the namespace when
// missing.
func (s Store) Save(ctx context.Context, stack string, refs []objects.Ref) error {
	keys := make([]string, 0, len(refs))
	seen := map[string]bool{}
	for _, r := range refs {
		if k := r.Key(); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	cm := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": Name(stack), "namespace": s.Namespace,
			"labels": objects.OwnedLabels(stack),
		},
		"data": map[string]string{dataKey: strings.Join(keys, "\n")},
	}
	body, err := json.Marshal(cm)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: objects.FieldManager, Force: ptr.To(true)}
	_, err = s.Client.CoreV1().ConfigMaps(s.Namespace).Patch(ctx, Name(stack), types.ApplyPatchType, body, opts)
	if apierrors.IsNotFound(err) {
		if err := s.ensureNamespace(ctx); err != nil {
			return err
		}
		_, err = s.Client.CoreV1().ConfigMaps(s.Namespace).Patch(ctx, Name(stack), types.ApplyPatchType, body, opts)
	}
	if err != nil {
		return fmt.Errorf("write inventory %s/%s: %w", s.Namespace, Name(stack), err)
	}
	return nil
}

// Delete removes the stack's inventory (after destroy).
func (s Store) Delete(ctx context.Context, stack string) error {
	err := s.Client.CoreV1().ConfigMaps(s.Namespace).Delete(ctx, Name(stack), metav1.DeleteOptions{})
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
