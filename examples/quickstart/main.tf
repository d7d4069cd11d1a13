# gpuslice quickstart: three packages on a Tesla V100-PCIE-32GB, a team
# allowed two 8 GiB slices and one 16 GiB slice, and llama3.2:3b served by
# Ollama on one 8 GiB slice.
#
#   export KUBE_CONFIG_PATH=~/.kube/config   # or set config_path below
#   tofu init && tofu apply                  # or: terraform init && terraform apply
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

# Configured like the hashicorp/kubernetes provider: config_path,
# config_context, host/token, exec {}, or the KUBE_* environment variables.
provider "gpuslice" {}

# Tenant namespaces, the fractions the node plugins offer, the admission
# policies that keep tenants inside their slices, and the node plugin on
# every GPU node, from the image `make image-push` published.
resource "gpuslice_platform" "this" {
  node_plugin {
    image          = var.node_plugin_image
    driver_root    = var.driver_root
    simulated_gpus = var.simulated_gpus
    env            = var.node_plugin_env
  }
}

resource "gpuslice_package" "v100_8gi" {
  name      = "v100-8gi"
  gpu_model = var.gpu_model
  fraction  = 25
}

resource "gpuslice_package" "v100_16gi" {
  name      = "v100-16gi"
  gpu_model = var.gpu_model
  fraction  = 50
}

resource "gpuslice_package" "v100_32gi" {
  name      = "v100-32gi"
  gpu_model = var.gpu_model
  fraction  = 100
}

resource "gpuslice_quota" "team_a" {
  namespace = "team-a"
  slices = {
    (gpuslice_package.v100_8gi.name)  = 2
    (gpuslice_package.v100_16gi.name) = 1
  }
  # A GPU pod still needs CPU and RAM on the host: pooled for the team.
  cpu_requests    = "8"
  memory_requests = "16Gi"
  cpu_limits      = "16"
  memory_limits   = "32Gi"
}

module "ollama" {
  source = "../modules/llm-on-slice"

  namespace      = gpuslice_quota.team_a.namespace
  package        = gpuslice_package.v100_8gi.name
  model          = "llama3.2:3b"
  context_length = var.context_length
  wait_for       = var.wait_for
}
