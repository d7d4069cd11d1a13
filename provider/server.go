package provider

// The protocol server: the framework's, with the fast path
// (internal/fastpath) in front for the requests a no-change plan is made
// of, unless GPUSLICE_PROVIDER_FAST_PATH=off.

import (
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	engineschema "github.com/gpuslice/gpuslice/engine/schema"
	"github.com/gpuslice/gpuslice/provider/internal/fastpath"
)

// NewServer returns the protocol-6 server of p (a provider New made), as
// providerserver.NewProtocol6WithError does, with the fast path in the
// mode GPUSLICE_PROVIDER_FAST_PATH sets (on, off or check).
func NewServer(p fwprovider.Provider) func() (tfprotov6.ProviderServer, error) {
	mode, err := fastpath.ModeFromEnv()
	if err != nil {
		return func() (tfprotov6.ProviderServer, error) { return nil, err }
	}
	return newServer(p, mode)
}

func newServer(p fwprovider.Provider, mode fastpath.Mode) func() (tfprotov6.ProviderServer, error) {
	framework := providerserver.NewProtocol6WithError(p)
	return func() (tfprotov6.ProviderServer, error) {
		inner, err := framework()
		gp, ok := p.(*gpusliceProvider)
		if err != nil || !ok || mode == fastpath.Off {
			return inner, err
		}
		return fastpath.New(inner, p, gp.fastResource, mode, &gp.fast), nil
	}
}

// fastResource is the resource of typeName with the last Configure's
// cluster data, for the fast path.
func (p *gpusliceProvider) fastResource(typeName string) (fastpath.Resource, bool) {
	data := p.currentData()
	if data == nil {
		return nil, false
	}
	def, ok := engineschema.ResourceByType(typeName)
	if !ok {
		return nil, false
	}
	return &gpusliceResource{def: def, data: data}, true
}
