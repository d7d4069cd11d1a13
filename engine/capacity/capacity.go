// Package capacity says what the cluster's GPUs offer, from what the node
// plugins publish (ResourceSlices) and what the scheduler allocated
// (ResourceClaims): per package the slices published, allocated and still
// free, per node too; and every GPU with its node, model, compute
// capability, memory and driver. The provider's gpuslice_capacity and
// gpuslice_gpus data sources read it.
package capacity

// Counts are slices of one package.
type Counts struct {
	Published int64 `json:"published"`
	Allocated int64 `json:"allocated"`
	// Free is what the scheduler could still allocate: slices on one GPU
	// share its memory and compute, so a GPU with a whole-GPU slice taken
	// has no free quarter left, however many are published.
	Free int64 `json:"free"`
}

// Package is one package's slices across the cluster and per node. For
// an any-size or time-sliced package, published is how many of its slices
// the GPUs could hold were they empty; for a MIG package, how many MIG
// instances of its profile the nodes publish.
type Package struct {
	Name     string `json:"name"`
	GPUModel string `json:"gpu_model"`
	Fraction int    `json:"fraction"`
	// Sharing is the package's kind: partition, any-size, time-sliced or
	// mig.
	Sharing string `json:"sharing"`
	// Isolation is what holds a slice to its share: software (the shim),
	// hardware (MIG) or none (time-sliced).
	Isolation string `json:"isolation"`
	// MIGProfile is a MIG package's profile, "" for the other kinds.
	MIGProfile string `json:"mig_profile"`
	Counts
	Nodes []NodeCounts `json:"nodes"`
}

// NodeCounts are a package's slices on one node.
type NodeCounts struct {
	Node string `json:"node"`
	Counts
}

// GPU is one physical GPU as its node plugin publishes it.
type GPU struct {
	Node              string `json:"node"`
	Model             string `json:"model"`
	UUID              string `json:"uuid"`
	Index             int64  `json:"index"`
	ComputeCapability string `json:"compute_capability"`
	Architecture      string `json:"architecture"`
	DriverVersion     string `json:"driver_version"`
	MemoryBytes       int64  `json:"memory_bytes"`
	// MemorySource says what MemoryBytes is (memsource.go).
	MemorySource string `json:"memory_source"`
	// counterSet is the pool/name of the GPU's counter set, whose memory
	// is the GPU's (a MIG instance's own is not).
	counterSet string
}
