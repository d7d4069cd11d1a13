package provider

import (
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"

	"github.com/gpuslice/gpuslice/engine/kube"
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
