package provider

import (
	"sync"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// plannedPackages remembers the packages this provider process planned.
// Terraform plans a package before the quotas and workloads that refer to
// it, so their checks know a package created in the same run — its GPU
// model for the image and fit checks, its name for the quota's zero
// entries — before it exists in the cluster.
type plannedPackages struct {
	mu       sync.Mutex
	packages map[string]*spec.Package
}

func (pp *plannedPackages) add(packages ...*spec.Package) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.packages == nil {
		pp.packages = map[string]*spec.Package{}
	}
	for _, p := range packages {
		c := *p
		c.Address = "planned.gpuslice_package." + p.Name
		pp.packages[p.Name] = &c
	}
}

// extend adds the planned packages the cluster does not have yet.
func (pp *plannedPackages) extend(rc engine.ResourceContext) engine.ResourceContext {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	have := map[string]bool{}
	for _, name := range rc.PackageNames() {
		have[name] = true
	}
	for name, p := range pp.packages {
		if !have[name] {
			rc.Packages = append(rc.Packages, p)
		}
	}
	return rc
}
