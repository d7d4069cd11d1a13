package contract

// Annotations on a package's DeviceClass (labelled LabelPackage): the slice
// one claim of the package gets. The engine writes them; people, plan-time
// checks and the admission policies read them; and the node plugin, at
// prepare, holds each allocation to them, so a claim that got past
// admission still gets exactly one slice of its package. A partition
// package's class carries AnnotationGPUModel, AnnotationFraction and
// AnnotationMemory only, as it always has.
const (
	AnnotationGPUModel = "gpuslice.dev/gpu-model" // the GPU's NVML name, as AttrModel
	AnnotationMemory   = "gpuslice.dev/memory"    // a quantity: the slice's memory
	AnnotationFraction = "gpuslice.dev/fraction"  // a partition's percent of the GPU
	// AnnotationSharing is SharingAnySize, SharingTimeSliced or SharingMIG;
	// absent on a partition package's class.
	AnnotationSharing = "gpuslice.dev/sharing"
	// AnnotationComputeShare is an any-size slice's compute, in percent.
	AnnotationComputeShare = "gpuslice.dev/compute-share"
	// AnnotationReplicas is a time-sliced package's slices per GPU.
	AnnotationReplicas = "gpuslice.dev/replicas"
	// AnnotationShares is what each claim of a time-sliced package asks of
	// its GPU's time-sliced device: SharesOf(replicas).
	AnnotationShares = "gpuslice.dev/shares"
	// AnnotationMIGProfile is a MIG package's profile, NVIDIA's name.
	AnnotationMIGProfile = "gpuslice.dev/mig-profile"
)
