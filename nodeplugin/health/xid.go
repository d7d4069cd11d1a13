package health

// XIDs the driver reports as critical (nvmlEventTypeXidCriticalError) that
// are the application's own fault: the GPU is fine, the process that hit
// them is not. This is the list NVIDIA's own device plugin skips
// (k8s-device-plugin, internal/rm/health.go), each as NVIDIA's XID
// catalogue (docs.nvidia.com/deploy/xid-errors) describes it. Every other
// critical XID makes the GPU unhealthy: an XID the table does not know is
// taken as the GPU's fault, because placing work on a failing GPU costs more
// than keeping a healthy one idle until it has been quiet for the recovery
// time.
var applicationXIDs = map[uint64]string{
	13: "graphics engine exception (an illegal instruction or out-of-range access in a kernel)",
	31: "GPU memory page fault (the application touched memory it does not own)",
	43: "GPU stopped processing (the application's channel was reset; others go on)",
	45: "preemptive cleanup (the driver ended a context after an earlier error or a killed process)",
	68: "video processor exception (NVDEC/NVENC fault in the application's stream)",
}

// gpuXIDs are the critical XIDs the table names as the GPU's fault, with
// the catalogue's meaning, so a taint's message says more than a number.
// The list documents the known ones; any XID outside applicationXIDs is
// unhealthy whether listed here or not.
var gpuXIDs = map[uint64]string{
	48:  "double-bit ECC error (uncorrectable memory error)",
	63:  "ECC page retirement or row remapping recorded (the GPU needs a reset to use the remapped memory)",
	64:  "ECC page retirement or row remapping failed",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error (the GPU needs a reset to clear it)",
	95:  "uncontained ECC error (the GPU needs a reset)",
	119: "GSP RPC timeout (the GPU's system processor stopped answering)",
	120: "GSP error",
}

// ApplicationXID reports whether an XID is the application's own fault
// (the GPU stays healthy), with what it means.
func ApplicationXID(xid uint64) (string, bool) {
	m, ok := applicationXIDs[xid]
	return m, ok
}

// XIDMeaning is what the catalogue says an XID is, or "" for one the
// tables do not name.
func XIDMeaning(xid uint64) string {
	if m, ok := gpuXIDs[xid]; ok {
		return m
	}
	return applicationXIDs[xid]
}
