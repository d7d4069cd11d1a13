// Command terraform-provider-gpuslice is the gpuslice Terraform/OpenTofu
// provider (registry.terraform.io/gpuslice/gpuslice). Terraform starts it;
// run it with -debug to attach a debugger (it prints TF_REATTACH_PROVIDERS).
package main

import (
	"flag"
	"log"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/gpuslice/gpuslice/provider"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "0.1.0"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers such as delve")
	flag.Parse()
	quietUnlessLogged()
	var opts []tf6server.ServeOpt
	if *debug {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	server, err := provider.NewServer(provider.New(version)())()
	if err != nil {
		log.Fatal(err)
	}
	if err := tf6server.Serve(provider.Address, func() tfprotov6.ProviderServer { return server }, opts...); err != nil {
		log.Fatal(err)
	}
}

// quietUnlessLogged turns the provider's logs off when no TF_LOG variable
// asks Terraform for any: a level left unset means TRACE to the plugin SDK,
// so every request was traced, encoded as JSON and sent to Terraform, which
// parsed and dropped each line — about a sixth of a no-change plan of 200
// workloads. With any TF_LOG* variable set, the levels are as before.
func quietUnlessLogged() {
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TF_LOG") {
			return
		}
	}
	// The provider's own logger reads TF_LOG_PROVIDER_<type>; the SDK's
	// read theirs.
	for _, name := range []string{"TF_LOG_PROVIDER_GPUSLICE", "TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"} {
		os.Setenv(name, "OFF")
	}
}
