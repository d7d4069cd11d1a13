# Cluster-wide settings: the slice sizes node plugins offer and the tenant
# label; and the node plugin itself, installed on the GPU nodes from its
# image (make image-push prints the reference to pin).
resource "gpuslice_platform" "this" {
  fractions          = [25, 50, 100]
  admission_policies = true

  node_plugin {
    image = "registry.example.com/gpuslice/gpuslice-nodeplugin:0.1.0@sha256:97a88d6cda99e366bcd4442259f59f3f7096acf1ba777022b1049c49bd30a2a5"
    # NVIDIA's driver container; "/" when the driver is installed on the host.
    driver_root = "/run/nvidia/driver"
    # Evict the pods of a GPU still failing 10 minutes after its fault
    # (default: never, running pods finish).
    health_evict_after = "10m"
  }
}
