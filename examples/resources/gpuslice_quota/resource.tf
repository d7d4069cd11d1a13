# Team A may hold two 8 GiB slices at once (every other package: 0), and
# pooled CPU and memory with headroom for the GPU pods' own requests.
resource "gpuslice_quota" "team_a" {
  namespace       = "team-a"
  slices          = { (gpuslice_package.small.name) = 2 }
  cpu_requests    = "8"
  memory_requests = "32Gi"
}
