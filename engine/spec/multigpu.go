package spec

// DevicesPerPod is how many devices (slices) of the workload's package one
// pod takes: its claim asks for exactly this many. Quota checks, capacity
// and status count slices with it, never with a literal 1.
func (w *Workload) DevicesPerPod() int {
	if w.GPUsPerPod < 1 {
		return 1 // unset in specs built by hand (tests, readback of old objects)
	}
	return int(w.GPUsPerPod)
}

// Distributed reports whether the workload is a distributed training job:
// several indexed pods that meet at a rendezvous.
func (w *Workload) Distributed() bool { return w.Kind == KindJob && w.Workers > 1 }

// Pods is how many pods the workload runs at once: its workers when
// distributed, else its replicas.
func (w *Workload) Pods() int32 {
	if w.Distributed() {
		return w.Workers
	}
	return w.Replicas
}

// Slices is how many slices the workload holds when all its pods run.
func (w *Workload) Slices() int64 { return int64(w.Pods()) * int64(w.DevicesPerPod()) }

// TrainingOperatorPyTorchJob is training_operator's value that renders a
// distributed training job as Kubeflow's PyTorchJob.
const TrainingOperatorPyTorchJob = "pytorchjob"

// PyTorchJob reports whether the workload is a distributed training job
// the Kubeflow Training Operator runs, not an indexed Job.
func (w *Workload) PyTorchJob() bool {
	return w.Distributed() && w.TrainingOperator == TrainingOperatorPyTorchJob
}

// UsesPyTorchJob reports whether any workload of the stack renders a
// PyTorchJob, whose CRD the cluster must serve.
func (s *Stack) UsesPyTorchJob() bool {
	for _, w := range s.Workloads {
		if w.PyTorchJob() {
			return true
		}
	}
	return false
}

// TrainingOperatorTrainJob is training_operator's value that renders a
// distributed training job as Kubeflow Trainer's TrainJob.
const TrainingOperatorTrainJob = "trainjob"

// TrainJob reports whether the workload is a distributed training job
// Kubeflow Trainer runs, not an indexed Job.
func (w *Workload) TrainJob() bool {
	return w.Distributed() && w.TrainingOperator == TrainingOperatorTrainJob
}

// UsesTrainJob reports whether any workload of the stack renders a
// TrainJob, whose CRDs the cluster must serve.
func (s *Stack) UsesTrainJob() bool {
	for _, w := range s.Workloads {
		if w.TrainJob() {
			return true
		}
	}
	return false
}

// ByOperator reports whether a training operator, not gpuslice, creates
// the workload's pods (a PyTorchJob or a TrainJob).
func (w *Workload) ByOperator() bool { return w.PyTorchJob() || w.TrainJob() }

// DefaultMasterPort is the rendezvous port of a distributed training job:
// torchrun's default, so scripts written for it work unchanged.
const DefaultMasterPort = 29500

// TrainingEnv are the variables gpuslice sets in every pod of a distributed
// training job, the names PyTorch's torchrun and Kubeflow's PyTorchJob use
// (torchrun reads its flags from PET_<FLAG>). A container may not set them:
// a wrong RANK or WORLD_SIZE hangs the rendezvous.
var TrainingEnv = []string{
	"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
	"PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE",
}

// MaxGPUsPerPod bounds gpus_per_pod: no node offers more GPUs than this.
const MaxGPUsPerPod = 16
