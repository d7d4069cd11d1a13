package contract

// RunnerClusterRole is the least-privilege ClusterRole a tofu runner (and
// the in-cluster `gpuslice reconcile`, which writes what an apply writes)
// is bound to. The chart's reconcile.clusterRole defaults to it.
const RunnerClusterRole = "gpuslice-runner"
