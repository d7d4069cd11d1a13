package incluster

import "fmt"

// stackPath is the configuration's directory in the repository: the
// guide's reconcile.path.
const stackPath = "stacks/prod"

// quickstart is examples/quickstart without what the chart already runs
// (the node plugin) or what needs the internet (Ollama's image): the
// platform, the three V100 packages, team-a's quota (its memory requests
// are what a commit changes) and a workload on an 8 GiB slice.
func quickstart(memoryRequests string) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

provider "gpuslice" {}

resource "gpuslice_platform" "this" {}

resource "gpuslice_package" "v100_8gi" {
  name      = "v100-8gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 25
}

resource "gpuslice_package" "v100_16gi" {
  name      = "v100-16gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 50
}

resource "gpuslice_package" "v100_32gi" {
  name      = "v100-32gi"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 100
}

resource "gpuslice_quota" "team_a" {
  namespace = "team-a"
  slices = {
    (gpuslice_package.v100_8gi.name)  = 2
    (gpuslice_package.v100_16gi.name) = 1
  }
  cpu_requests    = "8"
  memory_requests = %q
  cpu_limits      = "16"
  memory_limits   = "32Gi"
}

resource "gpuslice_workload" "llm" {
  namespace = gpuslice_quota.team_a.namespace
  name      = "llm"
  package   = gpuslice_package.v100_8gi.name
  container {
    image          = "registry.gpuslice.test/slice-check:1"
    command        = ["slice-check", "--sleep"]
    cpu_request    = "100m"
    memory_request = "64Mi"
    cpu_limit      = "1"
    memory_limit   = "128Mi"
  }
}
`, memoryRequests)
}
