package runner

import (
	"os"
	"strings"
	"testing"

	"github.com/gpuslice/gpuslice/acctest/internal/stacks"
	"github.com/gpuslice/gpuslice/internal/localregistry"
)

// The pages whose snippets the tests run, and the marker of each.
const (
	guide         = "../../templates/guides/tofu-controller.md"
	pipelineGuide = "../../templates/guides/ci-pipelines.md"
)

// snippet returns the fenced block that follows `<!-- runner-test: name -->`
// in the guide, so the guide and what the test runs cannot drift apart.
func snippet(t *testing.T, name string) string {
	return snippetOf(t, guide, "runner-test", name)
}

// pipelineSnippet is the ci-pipelines page's `<!-- ci-test: name -->`.
func pipelineSnippet(t *testing.T, name string) string {
	return snippetOf(t, pipelineGuide, "ci-test", name)
}

func snippetOf(t *testing.T, page, marker, name string) string {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	mark := "<!-- " + marker + ": " + name + " -->"
	_, rest, ok := strings.Cut(string(data), mark+"\n")
	if !ok {
		t.Fatalf("%s has no snippet marked %s", page, mark)
	}
	_, rest, ok = strings.Cut(rest, "\n") // the opening fence
	body, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatalf("%s: the snippet %s is not a fenced block", page, name)
	}
	return body
}

// cliConfig is the guide's CLI configuration with this cluster's registry
// in place of the example's.
func cliConfig(t *testing.T) string {
	return strings.ReplaceAll(snippet(t, "cli-config"), "registry.example.com", localregistry.Host)
}

// quickstart is examples/quickstart without what needs the host (the node
// plugin's image, Ollama's): the platform (binding the runner, as the guide
// says), the three V100 packages, team-a's quota and a workload on an 8 GiB
// slice, in the guide's backend.
func quickstart(t *testing.T, more string) string {
	return stack(snippet(t, "backend"), snippet(t, "platform"), more)
}

// stack is the quickstart with the given backend and platform.
func stack(backend, platform, more string) string {
	return backend + "\n" + stacks.Provider + "\n" + platform + "\n" + stacks.Quickstart("16Gi") + more
}

// slowJob is a job that runs until it is stopped, on the second 8 GiB
// slice: apply waits for it to complete, which is when a runner is stopped.
// It exits on SIGTERM (slice-check does), so the destroy at the end takes
// no grace period, and it burns no CPU the rest of the node needs.
const slowJob = `
resource "gpuslice_workload" "slow" {
  namespace = gpuslice_quota.team_a.namespace
  name      = "slow"
  package   = gpuslice_package.v100_8gi.name
  kind      = "job"
  container {
    image          = "registry.gpuslice.test/slice-check:1"
    command        = ["slice-check", "--sleep"]
    cpu_request    = "100m"
    memory_request = "64Mi"
    cpu_limit      = "1"
    memory_limit   = "128Mi"
  }
}
`
