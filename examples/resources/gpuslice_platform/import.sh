# The platform namespace.
terraform import gpuslice_platform.this gpuslice-system
