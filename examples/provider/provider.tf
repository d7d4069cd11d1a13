terraform {
  required_providers {
    gpuslice = {
      # Always fully qualified, so Terraform and OpenTofu resolve the same address.
      source = "registry.terraform.io/gpuslice/gpuslice"
    }
  }
}

variable "kubeconfig" {
  description = "Kubeconfig of the cluster gpuslice manages."
  type        = string
  default     = "~/.kube/config"
}

# Configured like the hashicorp/kubernetes provider (config_path, host,
# token, exec { … }, KUBE_* environment variables).
provider "gpuslice" {
  config_path = var.kubeconfig
}
