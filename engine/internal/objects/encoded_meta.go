package objects

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// An Encoded object is a metav1.Object for the informer's store: it reads
// and sets the metadata it keeps (name, namespace, resourceVersion, the
// kept labels); the others read as unset, as they are not kept beside the
// encoding. Setting one of those is a bug (a store's objects are never
// changed; change the decoded copy), and panics to say so.

func (e *Encoded) GetName() string               { return e.name }
func (e *Encoded) SetName(name string)           { e.name = name }
func (e *Encoded) GetNamespace() string          { return e.namespace }
func (e *Encoded) SetNamespace(namespace string) { e.namespace = namespace }
func (e *Encoded) GetResourceVersion() string    { return e.resourceVersion }
func (e *Encoded) SetResourceVersion(rv string)  { e.resourceVersion = rv }
func (e *Encoded) GetGenerateName() string       { return "" }
func (e *Encoded) SetGenerateName(string)        { e.notKept("generateName") }
func (e *Encoded) GetUID() types.UID             { return "" }
func (e *Encoded) SetUID(types.UID)              { e.notKept("uid") }
func (e *Encoded) GetGeneration() int64          { return 0 }
func (e *Encoded) SetGeneration(int64)           { e.notKept("generation") }
func (e *Encoded) GetSelfLink() string           { return "" }
func (e *Encoded) SetSelfLink(string)            { e.notKept("selfLink") }
func (e *Encoded) GetCreationTimestamp() metav1.Time {
	return metav1.Time{}
}
func (e *Encoded) SetCreationTimestamp(metav1.Time) { e.notKept("creationTimestamp") }
func (e *Encoded) GetDeletionTimestamp() *metav1.Time {
	return nil
}
func (e *Encoded) SetDeletionTimestamp(*metav1.Time)             { e.notKept("deletionTimestamp") }
func (e *Encoded) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (e *Encoded) SetDeletionGracePeriodSeconds(*int64)          { e.notKept("deletionGracePeriodSeconds") }
func (e *Encoded) GetAnnotations() map[string]string             { return nil }
func (e *Encoded) SetAnnotations(map[string]string)              { e.notKept("annotations") }
func (e *Encoded) GetFinalizers() []string                       { return nil }
func (e *Encoded) SetFinalizers([]string)                        { e.notKept("finalizers") }
func (e *Encoded) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (e *Encoded) SetOwnerReferences([]metav1.OwnerReference)    { e.notKept("ownerReferences") }
func (e *Encoded) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (e *Encoded) SetManagedFields([]metav1.ManagedFieldsEntry)  { e.notKept("managedFields") }

// GetLabels returns the kept labels, in a map of their own; nil when none
// was kept.
func (e *Encoded) GetLabels() map[string]string {
	if len(e.labels) == 0 {
		return nil
	}
	m := make(map[string]string, len(e.labels)/2)
	for i := 0; i+1 < len(e.labels); i += 2 {
		m[e.labels[i]] = e.labels[i+1]
	}
	return m
}

// SetLabels replaces the kept labels.
func (e *Encoded) SetLabels(labels map[string]string) {
	e.labels = e.labels[:0]
	for k, v := range labels {
		e.labels = append(e.labels, k, v)
	}
}

func (e *Encoded) notKept(field string) {
	panic(fmt.Sprintf("set %s of the encoded %s %s/%s, which keeps only its name, namespace, resourceVersion and some labels beside the encoding: change the decoded object (objects.Decoded); this is a bug in gpuslice",
		field, e.gvk.Kind, e.namespace, e.name))
}

var _ metav1.Object = (*Encoded)(nil)
