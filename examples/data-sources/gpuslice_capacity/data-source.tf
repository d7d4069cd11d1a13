# Quota is an entitlement, not a reservation: see how many slices are free.
data "gpuslice_capacity" "small" {
  package = gpuslice_package.small.name
}

output "free_small_slices" {
  value = data.gpuslice_capacity.small.packages[0].free
}
