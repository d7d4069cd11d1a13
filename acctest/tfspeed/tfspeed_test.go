// Package tfspeed measures Terraform's path against the gpuslice CLI's on
// the local control plane, side by side in one run, as `make bench` prints
// it: `tofu plan` (no changes, with and without refresh) and `tofu apply`
// (create, and an update touching every workload) of 2 packages, 10 quotas
// and N workloads, with the provider installed by `make install`; the same
// files with `gpuslice plan/apply`; OpenTofu's own floor, as many
// `terraform_data` resources, and its floor for gpuslice's schema, the same
// stack planned through a provider that does nothing (schemafloor_test.go);
// and the API requests per resource, counted by the provider's own
// transport (its debug log) and by the API server. The no-change plans are
// timed without logs, the median of five, on a control plane settled after
// the apply.
//
//	go test -run '^$' -bench TerraformSpeed -benchtime 1x -timeout 2h ./acctest/tfspeed/
//
// GPUSLICE_BENCH_SIZES=50,200 picks the sizes (default 50,200,1000);
// GPUSLICE_BENCH_CPUPROFILE=FILE writes the provider's CPU profile of a
// no-change plan of each size to FILE.<N>, and its allocation profile
// beside it (see profilePlan).
package tfspeed

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// row is one size's figures.
type row struct {
	workloads, resources int

	tofuCreate, tofuPlan, tofuPlanNoRefresh, tofuUpdate time.Duration
	// CPU time of the no-change plans (tofu with its provider, the CLI,
	// tofu alone): steadier than wall-clock time on a busy machine.
	tofuPlanCPU, cliPlanCPU, floorPlanCPU time.Duration
	// Requests of the no-change plan: as the provider counted them (its
	// debug log), and as the API server did (reads of the kinds gpuslice
	// reads).
	planProvider, planServer   counts
	createServer, updateServer counts

	cliCreate, cliPlan, cliUpdate time.Duration
	cliPlanServer                 counts

	floorCreate, floorPlan time.Duration
	// The same no-change plan through the schema floor (schemafloor_test.go).
	schemaFloorPlan, schemaFloorPlanCPU time.Duration
}

func BenchmarkTerraformSpeed(b *testing.B) {
	sizes := benchSizes(b, []int{50, 200, 1000})
	tools := prepare(b)
	var rows []row
	for b.Loop() {
		rows = rows[:0]
		for _, n := range sizes {
			r := row{workloads: n, resources: n + 12}
			measureTofu(b, tools, &r)
			measureCLI(b, tools, &r)
			measureFloor(b, tools, &r)
			rows = append(rows, r)
			b.Logf("%d workloads done", n)
		}
	}
	fmt.Print(table(rows))
	for _, r := range rows {
		b.ReportMetric(r.tofuPlan.Seconds(), fmt.Sprintf("tofu-plan-s/n=%d", r.workloads))
		b.ReportMetric(r.tofuPlanCPU.Seconds(), fmt.Sprintf("tofu-plan-cpu-s/n=%d", r.workloads))
		b.ReportMetric(float64(r.planProvider.reads())/float64(r.resources), fmt.Sprintf("plan-reads/resource/n=%d", r.workloads))
	}
}

func sec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// table prints the figures and the targets, met or not.
func table(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s, GOMAXPROCS %d, %s\n\n", runtime.GOOS+"/"+runtime.GOARCH, runtime.GOMAXPROCS(0), time.Now().Format("2006-01-02"))
	b.WriteString("| N workloads (resources) | `tofu plan` no changes | `-refresh=false` | reads per resource in that plan: provider / API server | `tofu apply` create | `tofu apply` update all | `gpuslice plan` | `gpuslice apply` create | `gpuslice apply` update all | `terraform_data` plan / apply create |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d (%d) | %s | %s | %.3f / %.3f (%s) | %s | %s | %s | %s | %s | %s / %s |\n",
			r.workloads, r.resources, sec(r.tofuPlan), sec(r.tofuPlanNoRefresh),
			float64(r.planProvider.reads())/float64(r.resources), float64(r.planServer.reads())/float64(r.resources), r.planProvider,
			sec(r.tofuCreate), sec(r.tofuUpdate), sec(r.cliPlan), sec(r.cliCreate), sec(r.cliUpdate), sec(r.floorPlan), sec(r.floorCreate))
	}
	fmt.Fprintf(&b, "\nNo-change plans: the median of %d runs each, without logs, as a user runs them; the request counts are of one more plan, with the provider's debug log.\n", plans)
	b.WriteString("\nCPU time of the no-change plans (user + system, with the children each waited for): steadier than wall-clock time on a shared machine.\n\n")
	b.WriteString("| N | `tofu plan` (tofu + provider) | `gpuslice plan` | `terraform_data` plan (tofu alone) |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", r.workloads, sec(r.tofuPlanCPU), sec(r.cliPlanCPU), sec(r.floorPlanCPU))
	}
	b.WriteString("\nThe no-change `tofu plan` against OpenTofu's two floors: as many `terraform_data` resources (OpenTofu alone), and the same stack through a provider that serves gpuslice's schema and does nothing else (OpenTofu's work on these resources, and the plugin protocol). The plan less the schema floor is the provider's own share.\n\n")
	b.WriteString("| N | `tofu plan` | schema floor | `terraform_data` floor | schema floor ÷ `terraform_data` floor | provider's share (plan − schema floor) |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %s (CPU %s) | %s (CPU %s) | %s (CPU %s) | %.1f× (CPU %.1f×) | %s (CPU %s) |\n", r.workloads,
			sec(r.tofuPlan), sec(r.tofuPlanCPU), sec(r.schemaFloorPlan), sec(r.schemaFloorPlanCPU), sec(r.floorPlan), sec(r.floorPlanCPU),
			r.schemaFloorPlan.Seconds()/r.floorPlan.Seconds(), r.schemaFloorPlanCPU.Seconds()/r.floorPlanCPU.Seconds(),
			sec(r.tofuPlan-r.schemaFloorPlan), sec(r.tofuPlanCPU-r.schemaFloorPlanCPU))
	}
	b.WriteString("\nAPI requests the API server counted (every verb, the kinds gpuslice reads and writes):\n\n")
	b.WriteString("| N | `tofu apply` create | per resource | `tofu apply` update all | per resource | `gpuslice plan` |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %d | %.2f | %d | %.2f | %d |\n", r.workloads, r.createServer.total(), float64(r.createServer.total())/float64(r.resources),
			r.updateServer.total(), float64(r.updateServer.total())/float64(r.resources), r.cliPlanServer.total())
	}
	b.WriteString("\nTargets (issues 15 and 37):\n")
	byN := map[int]row{}
	for _, r := range rows {
		byN[r.workloads] = r
	}
	check := func(ok bool, format string, args ...any) {
		mark := "met"
		if !ok {
			mark = "NOT met"
		}
		fmt.Fprintf(&b, "- %s: %s\n", fmt.Sprintf(format, args...), mark)
	}
	if r, ok := byN[200]; ok {
		check(r.tofuPlan <= 2*time.Second, "tofu plan of 200 workloads ≤ 2 s (%s)", sec(r.tofuPlan))
		check(r.tofuPlan <= 3*r.floorPlan, "tofu plan of 200 workloads ≤ 3× the terraform_data floor of this run (%.2f×: %s against %s; the schema floor alone is %.2f×)",
			r.tofuPlan.Seconds()/r.floorPlan.Seconds(), sec(r.tofuPlan), sec(r.floorPlan), r.schemaFloorPlan.Seconds()/r.floorPlan.Seconds())
		per := float64(r.planProvider.reads()) / float64(r.resources)
		check(per <= 0.3, "≤ 0.3 requests per resource (%.3f)", per)
		ratio := r.tofuCreate.Seconds() / r.cliCreate.Seconds()
		check(ratio <= 2, "tofu apply creating 200 ≤ 2× the CLI's apply (%.2f×)", ratio)
		if big, ok := byN[1000]; ok {
			ratio := big.tofuPlan.Seconds() / r.tofuPlan.Seconds()
			check(ratio <= 5, "tofu plan of 1000 ≤ 5× that of 200 (%.2f×)", ratio)
		}
	}
	return b.String()
}

// configuration writes the files both tofu and the CLI read: 2 packages,
// 10 quotas (one namespace each) and n workloads spread over them, with
// zero replicas so controllers do not flood the API server with pods (the
// figures are gpuslice's). contextLength is what an update changes.
func configuration(dir, prefix, kubeconfig string, n int, contextLength string) error {
	var b strings.Builder
	fmt.Fprintf(&b, `terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

provider "gpuslice" {
  config_path = %q
}
`, kubeconfig)
	for _, f := range []int{25, 50} {
		fmt.Fprintf(&b, `
resource "gpuslice_package" "p%d" {
  name      = "%s-%d"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = %d
}
`, f, prefix, f, f)
	}
	for q := range 10 {
		fmt.Fprintf(&b, `
resource "gpuslice_quota" "q%d" {
  namespace    = "%s-ns%d"
  slices       = { (gpuslice_package.p25.name) = %d, (gpuslice_package.p50.name) = %d }
  cpu_requests = "1000"
}
`, q, prefix, q, n, n)
	}
	for i := range n {
		fmt.Fprintf(&b, `
resource "gpuslice_workload" "w%d" {
  namespace = gpuslice_quota.q%d.namespace
  name      = "w%d"
  package   = gpuslice_package.p%d.name
  replicas  = 0
  wait_for  = "none"
  container {
    image          = "ollama/ollama:0.24.0"
    cpu_request    = "1"
    memory_request = "2Gi"
    memory_limit   = "4Gi"
    env            = { OLLAMA_CONTEXT_LENGTH = %q }
    port {
      container_port = 11434
      name           = "http"
    }
  }
  expose {
    port = 11434
  }
}
`, i, i%10, i, []int{25, 50}[i%2], contextLength)
	}
	return os.WriteFile(filepath.Join(dir, "main.tf"), []byte(b.String()), 0o644)
}

// floor writes n terraform_data resources: what OpenTofu itself costs.
func floor(dir string, n int) error {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "resource \"terraform_data\" \"r%d\" {\n  input = \"%d\"\n}\n", i, i)
	}
	return os.WriteFile(filepath.Join(dir, "main.tf"), []byte(b.String()), 0o644)
}
