# The package name (its DeviceClass).
terraform import gpuslice_package.small v100-8gi
