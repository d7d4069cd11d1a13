package incluster

import "github.com/gpuslice/gpuslice/acctest/internal/stacks"

// stackPath is the configuration's directory in the repository: the
// guide's reconcile.path.
const stackPath = "stacks/prod"

// quickstart is examples/quickstart without what the chart already runs
// (the node plugin) or what needs the internet (Ollama's image): the
// platform, the three V100 packages, team-a's quota (its memory requests
// are what a commit changes) and a workload on an 8 GiB slice.
func quickstart(memoryRequests string) string {
	return stacks.Provider + `
resource "gpuslice_platform" "this" {}

` + stacks.Quickstart(memoryRequests)
}
