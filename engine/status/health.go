package status

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuslice/gpuslice/contract"
)

// DeviceHealth is a gpuslice device allocated to one of a workload's
// containers that the kubelet reports as not healthy, from what the node
// plugin's health stream said (the pod's
// status.containerStatuses[].allocatedResourcesStatus, KEP-4680).
type DeviceHealth struct {
	Pod       string `json:"pod"`
	Container string `json:"container"`
	// Claim is the pod's ResourceClaim holding the device.
	Claim string `json:"claim"`
	// Device is the device as pool/name: its node and device name.
	Device string `json:"device"`
	// Health is Unhealthy, or Unknown (the node plugin stopped reporting).
	Health string `json:"health"`
	// Message is why, as the node plugin said it (e.g. "GPU 0 (xid-79):
	// critical XID 79: GPU has fallen off the bus"); empty where the
	// kubelet does not pass messages on.
	Message string `json:"message,omitempty"`
}

// unhealthyDevices lists the gpuslice devices of the pods that the kubelet
// reports unhealthy or unknown.
func unhealthyDevices(pods []corev1.Pod) []DeviceHealth {
	var out []DeviceHealth
	for _, pod := range pods {
		claims := map[string]string{} // the pod's name for a claim: the claim
		for _, cs := range pod.Status.ResourceClaimStatuses {
			if cs.ResourceClaimName != nil {
				claims[cs.Name] = *cs.ResourceClaimName
			}
		}
		statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
		for _, c := range statuses {
			for _, rs := range c.AllocatedResourcesStatus {
				// "claim:<name in the pod>" or "claim:<name in the pod>/<request>"
				ref, isClaim := strings.CutPrefix(string(rs.Name), "claim:")
				if !isClaim {
					continue
				}
				podClaim, _, _ := strings.Cut(ref, "/")
				for _, h := range rs.Resources {
					device, ours := strings.CutPrefix(string(h.ResourceID), contract.DriverName+"/")
					if !ours || h.Health == corev1.ResourceHealthStatusHealthy {
						continue
					}
					d := DeviceHealth{Pod: pod.Name, Container: c.Name, Claim: claims[podClaim], Device: device, Health: string(h.Health)}
					if d.Claim == "" {
						d.Claim = podClaim
					}
					if h.Message != nil {
						d.Message = *h.Message
					}
					out = append(out, d)
				}
			}
		}
	}
	return out
}
