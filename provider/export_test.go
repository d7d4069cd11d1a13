package provider

import (
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/gpuslice/gpuslice/engine"
	"github.com/gpuslice/gpuslice/engine/kube"
	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
)

// LastRun returns what the engine of p's last Configure (one Terraform
// command) has sent to the API server so far, and how many informers its
// view runs.
func LastRun(p fwprovider.Provider) (kube.Counts, int) {
	gp := p.(*gpusliceProvider)
	gp.mu.Lock()
	defer gp.mu.Unlock()
	if gp.last == nil {
		return kube.Counts{}, 0
	}
	return gp.last.Clients.Requests.Counts(), gp.last.Informers()
}

// Prefetched is what the last Configure started reading before any
// resource was read.
func Prefetched(p fwprovider.Provider) []engine.Read {
	gp := p.(*gpusliceProvider)
	gp.mu.Lock()
	defer gp.mu.Unlock()
	return gp.prefetched
}

// NewCheckedServer is NewServer in check mode: every request the fast path
// serves is served by the framework too, and a difference is an error on
// the request.
func NewCheckedServer(p fwprovider.Provider) func() (tfprotov6.ProviderServer, error) {
	return newServer(p, fastpath.Check)
}

// Served counts the requests of each kind a fast path served.
type Served struct{ Validate, Upgrade, Read, Plan int64 }

// FastServed is how many requests p's fast path has served.
func FastServed(p fwprovider.Provider) Served {
	f := &p.(*gpusliceProvider).fast
	return Served{Validate: f.Validate.Load(), Upgrade: f.Upgrade.Load(), Read: f.Read.Load(), Plan: f.Plan.Load()}
}

// LastReads lists the informers the engine of p's last Configure runs.
func LastReads(p fwprovider.Provider) []engine.Read {
	gp := p.(*gpusliceProvider)
	gp.mu.Lock()
	defer gp.mu.Unlock()
	if gp.last == nil {
		return nil
	}
	return gp.last.Reads()
}
