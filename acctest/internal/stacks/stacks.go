// Package stacks holds the quickstart stack the GitOps acceptance tests
// apply from a runner pod, a CI job or the in-cluster reconcile:
// examples/quickstart without what needs this machine's host or the
// internet (the node plugin's image, Ollama's).
package stacks

import "fmt"

// Provider requires the gpuslice provider and configures nothing: in a
// pod, the in-cluster configuration; in a CI job, KUBE_CONFIG_PATH.
const Provider = `terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

provider "gpuslice" {}
`

// Quickstart is the three V100 packages, team-a's quota with
// memoryRequests (what a test's commit changes) and a workload on an 8 GiB
// slice running slice-check.
func Quickstart(memoryRequests string) string {
	return fmt.Sprintf(`resource "gpuslice_package" "v100_8gi" {
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
