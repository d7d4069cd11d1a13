// Package objects describes the Kubernetes objects gpuslice renders: how to
// name one (Ref), which API resource serves each kind, in which order kinds
// are applied, and the ownership labels every rendered object carries.
package objects

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuslice/gpuslice/contract"
)

// Ownership labels and annotations.
const (
	// LabelStack names the stack (inventory) an object belongs to.
	LabelStack = "gpuslice.dev/stack"
	// LabelWorkload names the workload that pods, claims and templates
	// belong to.
	LabelWorkload = "gpuslice.dev/workload"
	// AnnotationAddress is the configuration address that produced the
	// object, e.g. gpuslice_workload.ollama.
	AnnotationAddress = "gpuslice.dev/address"
	// AnnotationOnDestroy on a model volume says what pruning it does:
	// "delete" deletes it; otherwise it is kept, released from the stack
	// with AnnotationKeptFor, for the workload's next creation to take.
	AnnotationOnDestroy = "gpuslice.dev/on-destroy"
	// AnnotationKeptFor names the address a kept model volume was released
	// from; a workload of that address takes it back without -adopt.
	AnnotationKeptFor = "gpuslice.dev/kept-for"
	// FieldManager is the server-side apply field manager.
	FieldManager = "gpuslice"
	// FieldManagerReplicas holds an autoscaled workload's spec.replicas
	// while gpuslice stops applying it: server-side apply would otherwise
	// remove the field, resetting the count, when its only manager drops it.
	FieldManagerReplicas = "gpuslice-replicas-handover"
	// AnnotationAutoscaledBy on a Deployment or StatefulSet names the
	// autoscaler that owns its replica count (Kind/name).
	AnnotationAutoscaledBy = "gpuslice.dev/autoscaled-by"
)

// Ref identifies an object.
type Ref struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (r Ref) String() string {
	kind := r.Kind
	if r.Namespace != "" {
		return kind + " " + r.Namespace + "/" + r.Name
	}
	return kind + " " + r.Name
}

// Key is a stable one-line form, used in the inventory.
func (r Ref) Key() string {
	return strings.Join([]string{r.Group, r.Kind, r.Namespace, r.Name}, "/")
}

// ParseKey reverses Key.
func ParseKey(key string) (Ref, error) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
		return Ref{}, fmt.Errorf("invalid object key %q (want group/Kind/namespace/name)", key)
	}
	return Ref{Group: parts[0], Kind: parts[1], Namespace: parts[2], Name: parts[3]}, nil
}

// RefOf returns the Ref of an object.
func RefOf(u *unstructured.Unstructured) Ref {
	gvk := u.GroupVersionKind()
	return Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// Kind describes one kind gpuslice manages.
type Kind struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Level orders apply: lower levels first; prune runs in reverse.
	Level int
	// Release means pruning gives up gpuslice's fields instead of deleting
	// the object (namespaces hold things gpuslice does not own).
	Release bool
	// Immutable lists top-level field paths whose change needs the object
	// replaced (deleted and created again).
	Immutable [][]string
}

// Apply levels.
const (
	LevelNamespace = iota
	LevelCluster   // device classes, platform settings
	// LevelBinding: what binds a policy or a role comes after it. The API
	// server checks a binding against what it binds (a policy's paramKind,
	// a role's rules) for anyone but a cluster admin, such as a runner
	// with the least-privilege role, and refuses one created first.
	LevelBinding
	LevelQuota
	LevelSupport // claim templates, volumes, services
	LevelWorkload
	LevelAfterWorkload // preload jobs
)

var kinds = []Kind{
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Kind: "Namespace", Level: LevelNamespace, Release: true},
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true, Level: LevelCluster},
	{GVR: schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}, Kind: "DeviceClass", Level: LevelCluster},
	// Policies and their bindings come before quotas and everything tenants
	// run, so nothing is ever created in a tenant namespace unchecked.
	{GVR: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}, Kind: "ValidatingAdmissionPolicy", Level: LevelCluster},
	{GVR: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}, Kind: "ValidatingAdmissionPolicyBinding", Level: LevelBinding},
	{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Kind: "ClusterRole", Level: LevelCluster},
	{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, Kind: "Role", Namespaced: true, Level: LevelCluster},
	// The node plugin: its identity and rights before its DaemonSet.
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, Kind: "ServiceAccount", Namespaced: true, Level: LevelCluster},
	{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, Kind: "ClusterRoleBinding", Level: LevelBinding,
		Immutable: [][]string{{"roleRef"}}},
	{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, Kind: "DaemonSet", Namespaced: true, Level: LevelQuota,
		Immutable: [][]string{{"spec", "selector"}}},
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}, Kind: "ResourceQuota", Namespaced: true, Level: LevelQuota},
	{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, Kind: "RoleBinding", Namespaced: true, Level: LevelQuota,
		Immutable: [][]string{{"roleRef"}}},
	{GVR: schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"}, Kind: "ResourceClaimTemplate", Namespaced: true, Level: LevelSupport,
		Immutable: [][]string{{"spec"}}},
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, Kind: "PersistentVolumeClaim", Namespaced: true, Level: LevelSupport,
		Immutable: [][]string{{"spec", "storageClassName"}, {"spec", "accessModes"}}},
	{GVR: schema.GroupVersionResource{Version: "v1", Resource: "services"}, Kind: "Service", Namespaced: true, Level: LevelSupport},
	{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Namespaced: true, Level: LevelWorkload,
		Immutable: [][]string{{"spec", "selector"}}},
	{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, Kind: "StatefulSet", Namespaced: true, Level: LevelWorkload,
		Immutable: [][]string{{"spec", "selector"}, {"spec", "volumeClaimTemplates"}, {"spec", "serviceName"}}},
	{GVR: schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, Kind: "Job", Namespaced: true, Level: LevelWorkload,
		Immutable: [][]string{{"spec", "template"}, {"spec", "completions"}, {"spec", "selector"}}},
	// Kubeflow's, rendered only where its CRD is installed (plan checks).
	// The operator does not carry a changed spec over to the pods it made:
	// a change replaces the job, as a Job's immutable template does.
	{GVR: schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}, Kind: "PyTorchJob", Namespaced: true, Level: LevelWorkload,
		Immutable: [][]string{{"spec"}}},
	// Kubeflow Trainer's, likewise: the TrainJob's JobSet is made once from
	// its runtime, so the TrainJob names its runtime's digest in its spec
	// and a changed runtime replaces it.
	{GVR: schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainingruntimes"}, Kind: "TrainingRuntime", Namespaced: true, Level: LevelSupport},
	{GVR: schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}, Kind: "TrainJob", Namespaced: true, Level: LevelWorkload,
		Immutable: [][]string{{"spec"}}},
	{GVR: schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}, Kind: "HorizontalPodAutoscaler", Namespaced: true, Level: LevelAfterWorkload},
	// KEDA's, rendered only where its CRD is installed (plan checks).
	{GVR: schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}, Kind: "ScaledObject", Namespaced: true, Level: LevelAfterWorkload},
}

// Kinds returns every kind gpuslice renders.
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// KindOf returns how gpuslice handles a group/kind.
func KindOf(group, kind string) (Kind, error) {
	for _, k := range kinds {
		if k.GVR.Group == group && k.Kind == kind {
			return k, nil
		}
	}
	return Kind{}, fmt.Errorf("gpuslice does not manage %s objects (group %q)", kind, group)
}

// Sort orders objects by apply level, then kind, namespace and name.
func Sort(objs []Object) {
	sort.SliceStable(objs, func(i, j int) bool {
		li, lj := objs[i].Kind().Level, objs[j].Kind().Level
		if li != lj {
			return li < lj
		}
		return objs[i].Ref().Key() < objs[j].Ref().Key()
	})
}

// OwnedLabels are the labels every object of a stack carries.
func OwnedLabels(stack string) map[string]string {
	return map[string]string{contract.LabelManagedBy: contract.ManagedBy, LabelStack: stack}
}
