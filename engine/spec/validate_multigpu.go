package spec

import (
	"fmt"
	"slices"
)

// multiGPU checks gpus_per_pod and workers. Whether the package is whole
// GPUs is checked at plan time (engine/internal/checks), where the
// package's fraction is known from the stack or the cluster.
func (v *validator) multiGPU(w *Workload) {
	a := w.Address
	if w.GPUsPerPod < 1 || w.GPUsPerPod > MaxGPUsPerPod {
		v.errorf(a, "gpus_per_pod", "Invalid GPU count", "%d: use 1 to %d whole GPUs per pod; all of a pod's GPUs are on one node", w.GPUsPerPod, MaxGPUsPerPod)
	}
	switch {
	case w.Workers < 1:
		v.errorf(a, "workers", "Invalid worker count", "%d: use 1 (not distributed) or 2 and more workers for a distributed training job", w.Workers)
	case w.Workers > 1 && w.Kind != KindJob:
		v.errorf(a, "workers", "Workers need kind = \"job\"", "%d workers make a distributed training job (an indexed Job with a rendezvous); set kind = \"job\", or use replicas for a %s", w.Workers, w.Kind)
	case w.Workers > 1 && w.Replicas != 1:
		v.errorf(a, "replicas", "Replicas and workers both set", "a training job's pods are its %d workers: remove replicas (or set it to 1) and keep workers = %d", w.Workers, w.Workers)
	}
	switch {
	case w.TrainingOperator != "" && w.TrainingOperator != TrainingOperatorPyTorchJob && w.TrainingOperator != TrainingOperatorTrainJob:
		v.errorf(a, "training_operator", "Invalid training operator", "%q: use %q (Kubeflow Trainer's TrainJob), %q (the Kubeflow Training Operator's PyTorchJob), or leave training_operator unset for an indexed Job",
			w.TrainingOperator, TrainingOperatorTrainJob, TrainingOperatorPyTorchJob)
	case w.TrainingOperator != "" && !w.Distributed():
		v.errorf(a, "training_operator", "Training operator without workers", "a %s runs a distributed training job: set kind = \"job\" and workers = 2 or more, or remove training_operator", w.TrainingOperator)
	}
	if !w.Distributed() {
		return
	}
	for _, name := range sortedKeys(w.Container.Env) {
		if slices.Contains(TrainingEnv, name) {
			v.errorf(a, fmt.Sprintf("container.env[%q]", name), "Reserved environment variable",
				"%s is set by gpuslice in every worker of a distributed training job (the rendezvous torchrun reads; for a PyTorchJob the Kubeflow Training Operator sets it, for a TrainJob Kubeflow Trainer); remove it", name)
		}
	}
}
