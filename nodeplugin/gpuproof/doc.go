// Package gpuproof is make gpu-proof: the node half of gpuslice (the shim,
// the node plugin's discovery, publishing, NVML accounting and enforcer)
// checked on a real NVIDIA GPU in one command, with no Kubernetes and no Go
// on the GPU machine. Its files:
//
//   - gpu_proof.py: the proof (Python's standard library only). It builds
//     the shim, slice-check and gpuproof-cuda with gcc, runs every check as
//     a claim's container runs it, prints one report and writes it to a file.
//   - cuda/gpuproof-cuda.c: the driver-API program behind the view, allocation,
//     two-process, compute-share and overhead checks; it runs the same on a
//     real GPU and on the simulated driver of nodeplugin/shim/fake.
//   - gpu_parts.py: the parts that need a real GPU and Python's GPU stack
//     (PyTorch, CuPy, nvidia-ml-py).
//   - gpuproof-nvml/: the Go program (make gpu-proof-bin) that runs
//     nodeplugin/discovery, nodeplugin/publish, nodeplugin/metrics and
//     nodeplugin/enforce on the machine's NVML.
//
// Without a GPU the proof runs against the simulated driver, and the test in
// this package does that in make test, so the proof cannot rot.
package gpuproof
