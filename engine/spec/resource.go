package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/zclconf/go-cty/cty"
)

// Resource is one instance of gpuslice_platform, gpuslice_package,
// gpuslice_quota or gpuslice_workload: what the HCL front end, the
// Terraform provider and the engine need to handle any of them alike.
// *Platform, *Package, *Quota and *Workload implement it.
type Resource interface {
	// Addr is the resource's configuration address, e.g.
	// gpuslice_workload.ollama.
	Addr() string
	// SetAddr places the resource at an address once its front end knows
	// it (the provider's is known only after decoding the id).
	SetAddr(address string)
	// ID is the import ID: the resource's name or namespace, or
	// <namespace>/<name> for a workload.
	ID() string
	// StackName names the stack holding this resource alone, as the
	// Terraform provider manages each instance, e.g.
	// tf-workload-team-a.ollama. It fits a label value.
	StackName() string
	// PlannedAttributes are the computed attributes known before apply,
	// by attribute name: the id, a package's slice size (once Resolve
	// has run; left out when its GPU model is unknown) and a workload's
	// service address. Every other computed attribute is known only after
	// apply.
	PlannedAttributes() map[string]cty.Value
	// AddTo adds the resource to s; it fails when s already holds a
	// platform and this is another.
	AddTo(s *Stack) error
}

var (
	_ Resource = (*Platform)(nil)
	_ Resource = (*Package)(nil)
	_ Resource = (*Quota)(nil)
	_ Resource = (*Workload)(nil)
)

// Addr implements Resource.
func (m *Meta) Addr() string { return m.Address }

// SetAddr implements Resource.
func (m *Meta) SetAddr(address string) { m.Address = address }

// StackOf returns a stack holding r alone.
func StackOf(r Resource) *Stack {
	s := &Stack{}
	_ = r.AddTo(s) // an empty stack takes any one resource
	return s
}

// labelValueMax is the length of a Kubernetes label value, which a stack
// name becomes.
const labelValueMax = 63

// resourceStackName shortens a long stack name to a label value: it keeps
// the start, readable, and appends a hash of the whole, so two long names
// stay apart.
func resourceStackName(name string) string {
	if len(name) <= labelValueMax {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:54] + "-" + hex.EncodeToString(sum[:])[:8]
}

// ID implements Resource: the platform namespace.
func (p *Platform) ID() string { return p.Namespace }

// StackName implements Resource.
func (p *Platform) StackName() string { return resourceStackName("tf-platform-" + p.Namespace) }

// PlannedAttributes implements Resource.
func (p *Platform) PlannedAttributes() map[string]cty.Value {
	return map[string]cty.Value{"id": cty.StringVal(p.ID())}
}

// AddTo implements Resource: a stack has at most one platform.
func (p *Platform) AddTo(s *Stack) error {
	if s.Platform != nil && s.Platform != p {
		return fmt.Errorf("%s is already declared; a cluster has one platform", s.Platform.Address)
	}
	s.Platform = p
	return nil
}

// ID implements Resource: the package (DeviceClass) name.
func (p *Package) ID() string { return p.Name }

// StackName implements Resource.
func (p *Package) StackName() string { return resourceStackName("tf-package-" + p.Name) }

// PlannedAttributes implements Resource.
func (p *Package) PlannedAttributes() map[string]cty.Value {
	attrs := map[string]cty.Value{"id": cty.StringVal(p.ID())}
	if p.MemoryBytes > 0 {
		attrs["memory_bytes"] = cty.NumberIntVal(p.MemoryBytes)
		attrs["memory"] = cty.StringVal(p.Memory)
		attrs["compute_share"] = cty.NumberIntVal(int64(p.ComputeShare))
	}
	return attrs
}

// AddTo implements Resource.
func (p *Package) AddTo(s *Stack) error {
	s.Packages = append(s.Packages, p)
	return nil
}

// ID implements Resource: the tenant namespace.
func (q *Quota) ID() string { return q.Namespace }

// StackName implements Resource.
func (q *Quota) StackName() string { return resourceStackName("tf-quota-" + q.Namespace) }

// PlannedAttributes implements Resource.
func (q *Quota) PlannedAttributes() map[string]cty.Value {
	return map[string]cty.Value{"id": cty.StringVal(q.ID())}
}

// AddTo implements Resource.
func (q *Quota) AddTo(s *Stack) error {
	s.Quotas = append(s.Quotas, q)
	return nil
}

// ID implements Resource: <namespace>/<name>.
func (w *Workload) ID() string { return w.Namespace + "/" + w.Name }

// StackName implements Resource.
func (w *Workload) StackName() string {
	return resourceStackName("tf-workload-" + w.Namespace + "." + w.Name)
}

// PlannedAttributes implements Resource.
func (w *Workload) PlannedAttributes() map[string]cty.Value {
	return map[string]cty.Value{"id": cty.StringVal(w.ID()), "service_address": cty.StringVal(w.ServiceAddress())}
}

// AddTo implements Resource.
func (w *Workload) AddTo(s *Stack) error {
	s.Workloads = append(s.Workloads, w)
	return nil
}

// ServiceAddress is the in-cluster address of the workload's Service,
// <name>.<namespace>.svc:<port>; empty when it is not exposed.
func (w *Workload) ServiceAddress() string {
	if w.Expose == nil {
		return ""
	}
	return fmt.Sprintf("%s.%s.svc:%d", w.Name, w.Namespace, w.Expose.Port)
}

// PackageRef is a use of a package by name: a quota's slices entry or a
// workload's package.
type PackageRef struct {
	// Address and Attribute locate the use, e.g. slices["v100-8gi"].
	Address   string
	Attribute string
	Name      string
}

// PackageRefs lists the packages the stack's quotas and workloads use, in
// their order (a quota's entries by name).
func (s *Stack) PackageRefs() []PackageRef {
	var out []PackageRef
	for _, q := range s.Quotas {
		for _, name := range sortedKeys(q.Slices) {
			out = append(out, PackageRef{Address: q.Address, Attribute: fmt.Sprintf("slices[%q]", name), Name: name})
		}
	}
	for _, w := range s.Workloads {
		out = append(out, PackageRef{Address: w.Address, Attribute: "package", Name: w.Package})
	}
	return out
}
