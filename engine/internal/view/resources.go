package view

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
)

// Resource is one kind the view caches, and the part of the cluster it
// covers: a label or field selector, all namespaces at once or one informer
// per namespace read.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Labels and Fields select what is cached.
	Labels, Fields string
	// PerNamespace: never cluster-wide (events: a busy cluster has many).
	PerNamespace bool
	// Typed objects are stored as their client-go type without
	// managedFields, also when read unstructured (the fake dynamic client
	// of small tests); the others keep what plan compares, managedFields
	// too.
	Typed bool
}

func (r Resource) String() string {
	s := r.GVR.Resource
	if r.GVR.Group != "" {
		s += "." + r.GVR.Group
	}
	if r.Labels != "" {
		s += " labelled " + r.Labels
	}
	if r.Fields != "" {
		s += " with " + r.Fields
	}
	return s
}

var managedBy = contract.LabelManagedBy + "=" + contract.ManagedBy

// The resources the engine reads besides the kinds it renders: each is
// scoped to what a plan or a workload's status can need.
var (
	// Namespaces are listed whole: gpuslice only labels them, so an
	// unlabelled one is still the stack's to label.
	Namespaces = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Kind: "Namespace"}
	// Pods of workloads: the checks' quota usage and the status.
	Pods = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "Pod", Namespaced: true,
		Labels: objects.LabelWorkload, Typed: true}
	// ResourceClaims, all of them: any claim may hold a gpuslice slice.
	ResourceClaims = Resource{GVR: schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"},
		Kind: "ResourceClaim", Namespaced: true, Typed: true}
	// ResourceSlices the gpuslice node plugins publish.
	ResourceSlices = Resource{GVR: schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"},
		Kind: "ResourceSlice", Fields: "spec.driver=" + contract.DriverName, Typed: true}
	// ResourceQuotas and LimitRanges, all of them: another team's quota
	// limits a workload as much as gpuslice's.
	ResourceQuotas = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}, Kind: "ResourceQuota",
		Namespaced: true, Typed: true}
	LimitRanges = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "limitranges"}, Kind: "LimitRange",
		Namespaced: true, Typed: true}
	// WarningEvents name why a controller cannot create pods or claims.
	WarningEvents = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "events"}, Kind: "Event", Namespaced: true,
		Fields: "type=Warning", PerNamespace: true, Typed: true}
)

// Managed is a kind gpuslice renders, as the view caches it: every object
// labelled managed-by gpuslice, of every stack, unstructured. Namespaces,
// which gpuslice shares, are the whole Namespaces resource.
func Managed(k objects.Kind) Resource {
	if k.Release {
		return Namespaces
	}
	return Resource{GVR: k.GVR, Kind: k.Kind, Namespaced: k.Namespaced, Labels: managedBy}
}

// ManagedKind is Managed for a kind by group and name.
func ManagedKind(group, kind string) Resource {
	k, err := objects.KindOf(group, kind)
	if err != nil {
		panic(err) // only called with the kinds gpuslice renders
	}
	return Managed(k)
}

// ListKinds maps every resource the view may read to its list kind, for
// the fake dynamic client of small tests.
func ListKinds() map[schema.GroupVersionResource]string {
	out := map[schema.GroupVersionResource]string{}
	for _, r := range []Resource{Namespaces, Pods, ResourceClaims, ResourceSlices, ResourceQuotas, LimitRanges, WarningEvents} {
		out[r.GVR] = r.Kind + "List"
	}
	for _, k := range objects.Kinds() {
		out[k.GVR] = k.Kind + "List"
	}
	return out
}
