package provider_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
)

// The cluster connection known only at apply (as when the cluster is
// created in the same run): the plan skips the cluster checks instead of
// failing, and apply creates the package on the cluster it then knows.
func TestAccConnectionKnownAfterApply(t *testing.T) {
	needCluster(t)
	const name = "acc-late-connection"
	config := fmt.Sprintf(`
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

resource "terraform_data" "kubeconfig" {
  input = %q
}

provider "gpuslice" {
  config_path = terraform_data.kubeconfig.output
}

resource "gpuslice_package" "p" {
  name      = %q
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 50
}
`, kubeconfig, name)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		CheckDestroy:             deviceClassGone(name),
		Steps: []resource.TestStep{{
			Config: config,
			Check:  deviceClassSelector(name, 50),
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("gpuslice_package.p", plancheck.ResourceActionCreate)},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
		}},
	})
}

// No connection configured: no kubeconfig is read (KUBECONFIG points at the
// test cluster here, and is ignored), the plan works without the cluster,
// apply says what to configure.
func TestAccNoConnection(t *testing.T) {
	needCluster(t)
	// On the tester's cluster KUBE_CONFIG_PATH names it: unset here, as
	// the provider reads it.
	t.Setenv("KUBE_CONFIG_PATH", "")
	t.Setenv("KUBECONFIG", kubeconfig)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{{
			Config: `
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

provider "gpuslice" {}

resource "gpuslice_package" "p" {
  name      = "acc-no-connection"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}
`,
			ExpectError: regexp.MustCompile(`(?s)No cluster.*no cluster connection configured.*KUBE_CONFIG_PATH`),
		}},
	})
}
