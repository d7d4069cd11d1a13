// Package gpuproof is make gpu-proof: the node half of gpuslice (the shim,
// the node plugin's discovery, accounting files, CDI spec and enforcer)
// checked on a real NVIDIA GPU in one command, with no Kubernetes and no Go
// on the GPU machine: gcc, make and python3 (standard library) are enough.
// Its files:
//
//   - gpu_proof.py: the proof. It builds the shim, slice-check and
//     gpuproof-cuda with gcc, runs every check as a claim's container runs
//     it, prints one report and writes it to a file.
//   - production.py: the production path (the shim through
//     /etc/ld.so.preload, the read-only limits), any-size and time-sliced
//     claims, MIG, and the idle check before a compute share is measured.
//   - harness.py: the report and the programs it starts.
//   - nvml.py, plugin_files.py, enforcer.py, container.py: what the node
//     plugin does in Go (discovery; the limits file and region prepare
//     writes; the enforcer; the claim's CDI spec), in Python. The tests in
//     plugincode_test.go hold each to the plugin's own code on the same
//     inputs, byte for byte or decision for decision.
//   - cuda/gpuproof-cuda.c: the driver-API program behind the view,
//     allocation, two-process, compute-share and overhead checks; it runs the
//     same on a real GPU and on the simulated driver of nodeplugin/shim/fake.
//   - gpu_parts.py: the parts that need a real GPU and Python's GPU stack
//     (PyTorch, CuPy, nvidia-ml-py).
//
// Without a GPU the proof runs against the simulated driver, and the tests in
// this package run make gpu-proof that way in make test, from a copy of the
// checkout with Go off the PATH, so the proof cannot rot.
package gpuproof
