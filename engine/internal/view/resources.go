package view

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/objects"
	"github.com/gpuslice/gpuslice/engine/render"
)

// Resource is one kind the view caches, and the part of the cluster it
// covers: a label or field selector, and for a namespaced kind one informer
// per namespace read — or, for a ClusterWide resource, one for all.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Labels and Fields select what is cached.
	Labels, Fields string
	// ClusterWide reads a namespaced kind in all namespaces at once. Only
	// where a check needs objects of namespaces the configuration does not
	// name: otherwise a plan's cost would grow with other tenants' objects.
	ClusterWide bool
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

// perNamespace says whether the view reads r one namespace at a time.
func (r Resource) perNamespace() bool { return r.Namespaced && !r.ClusterWide }

var managedBy = contract.LabelManagedBy + "=" + contract.ManagedBy

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// The resources the engine reads besides the kinds it renders: each is
// scoped to what a plan or a workload's status can need. Namespaced ones
// are read in the namespaces a run names, unless ClusterWide says why not.
var (
	// Pods of workloads: the checks' quota usage and the status.
	Pods = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "Pod", Namespaced: true,
		Labels: objects.LabelWorkload, Typed: true}
	// WorkloadClaims are the claims made from workloads' templates (which
	// carry the workload label): a workload's status.
	WorkloadClaims = Resource{GVR: resourceClaimsGVR, Kind: "ResourceClaim", Namespaced: true, Labels: objects.LabelWorkload, Typed: true}
	// ResourceClaims, all of them, in every namespace: a claim anywhere
	// may hold a gpuslice slice (nothing forces a label on a claim outside
	// the platform's tenant namespaces), and the API offers no selector on
	// a claim's allocation. Read only to count free slices: the capacity
	// data source, and the free-slice check of a workload that wants more
	// pods than it runs.
	ResourceClaims = Resource{GVR: resourceClaimsGVR, Kind: "ResourceClaim", Namespaced: true, ClusterWide: true, Typed: true}
	// ResourceSlices the gpuslice node plugins publish: cluster-scoped.
	ResourceSlices = Resource{GVR: schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"},
		Kind: "ResourceSlice", Fields: "spec.driver=" + contract.DriverName, Typed: true}
	// DeviceTaintRules, all of them: a taint any rule puts on a gpuslice
	// device (a drain's or the platform's own) keeps new slices off it.
	// Read with the claims, only to count free slices.
	DeviceTaintRules = Resource{GVR: schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"},
		Kind: "DeviceTaintRule", Typed: true}
	// ResourceQuotas, all of them in a namespace read: another team's
	// quota limits a workload as much as gpuslice's. It also serves the
	// quota gpuslice renders (Managed), so it keeps what plan compares.
	ResourceQuotas = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}, Kind: "ResourceQuota",
		Namespaced: true}
	// LimitRanges of a namespace read: one can default what a quota demands.
	LimitRanges = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "limitranges"}, Kind: "LimitRange",
		Namespaced: true, Typed: true}
	// WarningEvents name why a controller cannot create pods or claims.
	WarningEvents = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "events"}, Kind: "Event", Namespaced: true,
		Fields: "type=Warning", Typed: true}
	// PlatformConfigMaps are the platform's settings, found by name in
	// whichever namespace the platform was applied to: every resource
	// renders with them.
	PlatformConfigMaps = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true,
		Labels: managedBy, Fields: "metadata.name=" + render.PlatformConfigMap, ClusterWide: true}
)

var resourceClaimsGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}

// NamespaceNamed is the Namespace object name, the only one a run reads of
// a namespace it names: gpuslice only labels namespaces, so an unlabelled
// one is still the stack's to label, and the view reads it by name.
func NamespaceNamed(name string) Resource {
	return Resource{GVR: namespacesGVR, Kind: "Namespace", Fields: "metadata.name=" + name}
}

// Managed is a kind gpuslice renders, as the view caches it: the objects
// labelled managed-by gpuslice, unstructured; namespaced kinds in the
// namespaces read. ResourceQuotas are read whole (the checks need every
// quota of a namespace). Namespaces, which gpuslice shares, are read by
// name (NamespaceNamed).
func Managed(k objects.Kind) Resource {
	if k.GVR == ResourceQuotas.GVR {
		return ResourceQuotas
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
	out := map[schema.GroupVersionResource]string{namespacesGVR: "NamespaceList"}
	for _, r := range []Resource{Pods, ResourceClaims, ResourceSlices, DeviceTaintRules, ResourceQuotas, LimitRanges, WarningEvents} {
		out[r.GVR] = r.Kind + "List"
	}
	for _, k := range objects.Kinds() {
		out[k.GVR] = k.Kind + "List"
	}
	return out
}
