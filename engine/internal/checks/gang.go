package checks

import (
	"fmt"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// wholeGPUs: several devices per pod only of a whole-GPU package. A
// fractional slice's memory and compute limits are one budget on one GPU;
// the admission policy would refuse the claim, so say it at plan time.
func (c *checker) wholeGPUs(w *spec.Workload, pkg *Package) {
	if w.DevicesPerPod() == 1 || pkg == nil || pkg.Fraction == 100 {
		return
	}
	if pkg.Kind() == contract.SharingMIG {
		c.errorf(w, "gpus_per_pod", "Several MIG instances per pod",
			"%s asks for %d devices of %s per pod, but %s is a MIG package (%s of %s): a CUDA process uses one MIG instance, so a claim takes one; set gpus_per_pod to 1 and use more replicas for more instances, or a package with fraction = 100 for several whole GPUs per pod",
			w.Address, w.DevicesPerPod(), pkg.Name, pkg.Name, pkg.MIGProfile, pkg.GPUModel)
		return
	}
	what := fmt.Sprintf("%d %% of a GPU", pkg.Fraction)
	switch pkg.Kind() {
	case contract.SharingAnySize:
		what = fmt.Sprintf("an any-size slice (%s, %d %% compute)", pkg.Memory, pkg.ComputeShare)
	case contract.SharingTimeSliced:
		what = "a time-sliced share of a GPU"
	}
	c.errorf(w, "gpus_per_pod", "Several slices of a fractional package",
		"%s asks for %d devices of %s per pod, but %s is %s: a fractional slice's memory and compute limits are one budget on one GPU, so a pod takes one slice of it. Use a package with fraction = 100 for several GPUs per pod, or more replicas for more slices",
		w.Address, w.DevicesPerPod(), pkg.Name, pkg.Name, what)
}

// beyondGrant reports (as errors) a workload the quota's grant can never
// hold: one pod's claim asking for more devices than the grant (the quota
// refuses that claim for good), or a distributed training gang larger than
// what the grant leaves after the stack's workloads before it. A gang that
// only partly fits deadlocks: the workers that start hold their slices
// while the rest wait for slices that never come.
func (c *checker) beyondGrant(w *spec.Workload, q Quota, hard int64) bool {
	per := int64(w.DevicesPerPod())
	if per > hard {
		c.errorf(w, "gpus_per_pod", "More GPUs per pod than granted",
			"each pod's claim asks for %d %s slices but ResourceQuota %s in %s grants %d, so the claims are refused and the workload never starts: raise slices[%q] to at least %d in the gpuslice_quota for %s, or lower gpus_per_pod",
			per, w.Package, q.Name, w.Namespace, hard, w.Package, per, w.Namespace)
		return true
	}
	if !w.Distributed() {
		return false
	}
	var before int64
	for _, o := range c.stack.Workloads {
		if o == w {
			break
		}
		if o.Namespace == w.Namespace && o.Package == w.Package {
			before += o.Slices()
		}
	}
	if w.Slices() <= hard-before {
		return false
	}
	c.errorf(w, "workers", "Gang does not fit the quota",
		"%d workers × %d %s slices need %d, but ResourceQuota %s in %s grants %d%s: a gang that only partly fits deadlocks (the workers that start hold their slices while the rest wait forever). Raise slices[%q] to at least %d in the gpuslice_quota for %s, or lower workers or gpus_per_pod",
		w.Workers, per, w.Package, w.Slices(), q.Name, w.Namespace, hard, othersNote(before), w.Package, w.Slices()+before, w.Namespace)
	return true
}

func othersNote(before int64) string {
	if before == 0 {
		return ""
	}
	return fmt.Sprintf(" and the stack's workloads before it take %d", before)
}

// trainingOperator: training_operator = "pytorchjob" needs the Kubeflow
// Training Operator's PyTorchJob CRD, "trainjob" Kubeflow Trainer's
// TrainJob and TrainingRuntime CRDs, else the job cannot be created and
// no pod would ever run.
func (c *checker) trainingOperator() {
	if c.facts.TrainJob != nil && !*c.facts.TrainJob {
		for _, w := range c.stack.Workloads {
			if w.TrainJob() {
				c.errorf(w, "training_operator", "Kubeflow Trainer not installed",
					"the cluster does not serve Kubeflow Trainer's TrainJob and TrainingRuntime (trainer.kubeflow.org/v1alpha1), so nothing would run %s's %d workers: install Kubeflow Trainer v2 (kubectl apply --server-side -k \"github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.0.0\"), set training_operator = \"pytorchjob\" where the Kubeflow Training Operator runs instead, or leave training_operator unset to run them as an indexed Job, which needs no operator",
					w.Name, w.Workers)
			}
		}
	}
	if c.facts.PyTorchJob == nil || *c.facts.PyTorchJob {
		return
	}
	for _, w := range c.stack.Workloads {
		if w.PyTorchJob() {
			c.errorf(w, "training_operator", "Kubeflow Training Operator not installed",
				"the cluster does not serve Kubeflow's PyTorchJob (kubeflow.org/v1), so nothing would run %s's %d workers: install the Kubeflow Training Operator (kubectl apply --server-side -k \"github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9.2\"), or leave training_operator unset to run them as an indexed Job, which needs no operator",
				w.Name, w.Workers)
		}
	}
}
