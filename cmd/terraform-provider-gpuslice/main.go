// Command terraform-provider-gpuslice is the gpuslice Terraform/OpenTofu
// provider (registry.terraform.io/gpuslice/gpuslice). Terraform starts it;
// run it with -debug to attach a debugger (it prints TF_REATTACH_PROVIDERS).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/gpuslice/gpuslice/provider"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "0.1.0"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers such as delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{Address: provider.Address, Debug: *debug})
	if err != nil {
		log.Fatal(err)
	}
}
