# gpuslice distributed training: PyTorch DDP over two workers, each on a
# whole Tesla V100-PCIE-32GB, as an indexed Job with a headless Service — no
# operator or CRD. Every worker gets its slice and the rendezvous variables
# torchrun reads (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, PET_*); plan
# fails when the whole gang does not fit the team's quota. With
# -var training_operator=trainjob it is a Kubeflow Trainer TrainJob instead,
# with -var training_operator=pytorchjob the Training Operator's PyTorchJob.
#
# Next to the quickstart's platform (or any cluster running the node plugin):
#   tofu init && tofu apply      # or: gpuslice apply
terraform {
  required_providers {
    gpuslice = { source = "registry.terraform.io/gpuslice/gpuslice" }
  }
}

provider "gpuslice" {}

resource "gpuslice_package" "whole" {
  name      = "train-v100-32gi"
  gpu_model = var.gpu_model
  fraction  = 100
}

resource "gpuslice_quota" "research" {
  namespace = "research"
  slices = {
    (gpuslice_package.whole.name) = var.granted_gpus
  }
  cpu_requests    = "8"
  memory_requests = "32Gi"
}

resource "gpuslice_workload" "ddp" {
  namespace    = gpuslice_quota.research.namespace
  name         = "ddp"
  package      = gpuslice_package.whole.name
  kind         = "job"
  workers      = var.workers
  gpus_per_pod = var.gpus_per_worker
  wait_for     = var.wait_for
  timeout      = "15m"
  # Kubeflow Trainer's TrainJob or the Training Operator's PyTorchJob
  # instead of the indexed Job, where that operator runs.
  training_operator = var.training_operator
  container {
    image = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
    # torchrun takes --nnodes, --node_rank, --nproc_per_node and the master
    # address from the PET_* variables gpuslice sets; the script is the
    # smallest DDP program: every rank adds its rank into one all-reduce.
    command = ["sh", "-c", <<-SCRIPT
      cat > /tmp/train.py <<'PY'
      import os, torch, torch.distributed as dist
      dist.init_process_group("nccl")
      rank = dist.get_rank()
      torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
      t = torch.tensor([float(rank)], device="cuda")
      dist.all_reduce(t)
      print(f"rank {rank} of {dist.get_world_size()}: sum of ranks {t.item():.0f}", flush=True)
      dist.destroy_process_group()
      PY
      exec torchrun /tmp/train.py
      SCRIPT
    ]
    cpu_request    = "2"
    memory_request = "8Gi"
  }
}
