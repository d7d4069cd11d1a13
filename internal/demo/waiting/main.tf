# Two whole-GPU trainers for team-b, applied with the gpuslice CLI (with a
# package of its own: the quickstart's belong to the Terraform state). The
# demo cluster has two V100s and the quickstart's Ollama holds a quarter of
# one: one trainer gets the free GPU, the other waits for a whole one. The
# trainers are slice-check holding their GPU (a real training image cannot
# be pulled here).
resource "gpuslice_package" "whole" {
  name      = "v100-32gi-train"
  gpu_model = "Tesla V100-PCIE-32GB"
  fraction  = 100
}

resource "gpuslice_quota" "team_b" {
  namespace       = "team-b"
  slices          = { (gpuslice_package.whole.name) = 2 }
  cpu_requests    = "4"
  memory_requests = "16Gi"
}

resource "gpuslice_workload" "trainer_1" {
  namespace = gpuslice_quota.team_b.namespace
  name      = "trainer-1"
  package   = gpuslice_package.whole.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = "registry.gpuslice.test/slice-check:1"
    command        = ["slice-check", "--sleep"]
    cpu_request    = "100m"
    memory_request = "4Gi"
  }
}

resource "gpuslice_workload" "trainer_2" {
  namespace = gpuslice_quota.team_b.namespace
  name      = "trainer-2"
  package   = gpuslice_package.whole.name
  kind      = "job"
  wait_for  = "none"
  container {
    image          = "registry.gpuslice.test/slice-check:1"
    command        = ["slice-check", "--sleep"]
    cpu_request    = "100m"
    memory_request = "4Gi"
  }
}
