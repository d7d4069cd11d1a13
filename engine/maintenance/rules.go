package maintenance

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
)

const (
	// TaintKey is the key of the taint a drain puts on devices.
	TaintKey = "gpuslice.dev/drain"
	// LabelDrain marks the DeviceTaintRules drain owns: undrain deletes
	// only those.
	LabelDrain = "gpuslice.dev/drain"
	// AnnotationNode and AnnotationGPU say what a rule drains (a node's
	// name does not fit a label's 63 characters); a node-wide rule has no
	// GPU annotation. The GPU is its UUID.
	AnnotationNode = "gpuslice.dev/drain-node"
	AnnotationGPU  = "gpuslice.dev/drain-gpu"
)

// desired is the DeviceTaintRule that taints one pool or one device of
// node; device empty: the whole pool (a node-wide drain).
func desired(node string, g *GPU, pool, device string, effect resourcev1.DeviceTaintEffect) *resourcev1.DeviceTaintRule {
	name := "gpuslice-drain-" + node
	ann := map[string]string{AnnotationNode: node}
	sel := &resourcev1.DeviceTaintSelector{Driver: ptr.To(contract.DriverName), Pool: ptr.To(pool)}
	value := "node"
	if pool != node {
		name += "-pool-" + pool
	}
	if g != nil {
		name = "gpuslice-drain-" + node + "-gpu-" + strconv.FormatInt(g.Index, 10) + "-" + device
		ann[AnnotationGPU] = g.UUID
		sel.Device = ptr.To(device)
		value = "gpu"
	}
	return &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: objectName(name), Annotations: ann,
			Labels: map[string]string{LabelDrain: "true", contract.LabelManagedBy: contract.ManagedBy}},
		Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: sel,
			Taint: resourcev1.DeviceTaint{Key: TaintKey, Value: value, Effect: effect}},
	}
}

// objectName keeps name if it is a valid object name, else shortens it
// with a hash of it (a long node name and device name together may pass
// 253 characters).
func objectName(name string) string {
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	// the cut may end a DNS label with '.' or '-', which may not precede '-'
	return strings.TrimRight(name[:200], ".-") + "-" + hex.EncodeToString(sum[:8])
}

// targets reports whether rule is a drain rule of t: of the node, and of
// the GPU when t names one (node-wide: every rule of the node).
func targets(rule *resourcev1.DeviceTaintRule, node, gpuUUID string) bool {
	if rule.Labels[LabelDrain] != "true" || rule.Annotations[AnnotationNode] != node {
		return false
	}
	return gpuUUID == "" || rule.Annotations[AnnotationGPU] == gpuUUID
}

// selects reports whether rule's selector picks the device.
func selects(rule *resourcev1.DeviceTaintRule, pool, device string) bool {
	s := rule.Spec.DeviceSelector
	if s == nil {
		return false
	}
	return (s.Driver == nil || *s.Driver == contract.DriverName) && (s.Pool == nil || *s.Pool == pool) && (s.Device == nil || *s.Device == device)
}
