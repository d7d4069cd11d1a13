# <namespace>/<name>. wait_for, timeout and the model block are not recorded
# in the cluster: import sets their defaults.
terraform import gpuslice_workload.ollama team-a/ollama
