package driver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceapply "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// SliceStatus is what the plugin reports in a prepared claim's
// status.devices[].data, one per device: tenants cannot look at the node,
// but they can read their claim to see which GPUs and which limits their
// containers got. A claim of several whole GPUs reports each GPU with its
// own memory; the claim's CDI device is the same for all.
type SliceStatus struct {
	GPUUUID             string `json:"gpuUUID"`
	GPUIndex            int    `json:"gpuIndex"`
	MemoryLimitBytes    uint64 `json:"memoryLimitBytes"`
	ComputeSharePercent int    `json:"computeSharePercent"`
	CDIDevice           string `json:"cdiDevice"`
	// Sharing is how the slice shares its GPU (partition, any-size,
	// time-sliced, mig); a time-sliced slice has no limits, whatever the
	// numbers above say.
	Sharing string `json:"sharing"`
	// MIGUUID and MIGProfile name a MIG slice's instance, with its GPU and
	// compute instance ids on its GPU (its memory is MemoryLimitBytes, held
	// by the hardware); GPUUUID is its parent's.
	MIGUUID            string `json:"migUUID,omitempty"`
	MIGProfile         string `json:"migProfile,omitempty"`
	MIGGPUInstance     int    `json:"migGPUInstance,omitempty"`
	MIGComputeInstance int    `json:"migComputeInstance,omitempty"`
}

// ConditionPrepared is the device condition set once the slice is prepared.
const ConditionPrepared = "Prepared"

// reportStatus writes the claims' device status in the background: a
// prepare never waits for, or fails on, this report. Claims whose status
// already says the same (prepared again after a restart) are left alone.
func (p *Plugin) reportStatus(claims map[string]checkpoint.Claim, objects []*resourceapi.ResourceClaim) {
	for _, obj := range objects {
		if c, ok := claims[string(obj.UID)]; ok && reported(obj, string(obj.UID), c) {
			delete(claims, string(obj.UID))
		}
	}
	for uid, c := range claims {
		go func() {
			ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
			defer cancel()
			err := p.applyStatus(ctx, uid, c)
			// a claim deleted (or recreated) meanwhile needs no report
			if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				p.log.Error(err, "report the prepared slice in the claim's status", "claim", c.Namespace+"/"+c.Name)
			}
		}()
	}
}

func sliceStatus(uid string, d checkpoint.Device) SliceStatus {
	s := SliceStatus{
		GPUUUID: d.GPUUUID, GPUIndex: d.GPUIndex, MemoryLimitBytes: d.MemoryBytes, ComputeSharePercent: d.Fraction, CDIDevice: cdispec.DeviceID(uid),
		Sharing: cmp.Or(d.Sharing, contract.SharingPartition),
	}
	if d.MIG != nil {
		s.MIGUUID, s.MIGProfile, s.MIGGPUInstance, s.MIGComputeInstance = d.MIG.UUID, d.MIG.Profile, d.MIG.GPUInstance, d.MIG.ComputeInstance
	}
	return s
}

// reported tells whether the claim's status already holds every device of
// the claim as prepared.
func reported(obj *resourceapi.ResourceClaim, uid string, c checkpoint.Claim) bool {
	for _, dev := range c.Devices {
		if !deviceReported(obj, uid, dev) {
			return false
		}
	}
	return len(c.Devices) > 0
}

func deviceReported(obj *resourceapi.ResourceClaim, uid string, dev checkpoint.Device) bool {
	for _, d := range obj.Status.Devices {
		if d.Driver != contract.DriverName || d.Pool != dev.Pool || d.Device != dev.Name || ptr.Deref(d.ShareID, "") != dev.ShareID || d.Data == nil {
			continue
		}
		var have SliceStatus
		return json.Unmarshal(d.Data.Raw, &have) == nil && have == sliceStatus(uid, dev) &&
			meta.IsStatusConditionTrue(d.Conditions, ConditionPrepared)
	}
	return false
}

func (p *Plugin) applyStatus(ctx context.Context, uid string, c checkpoint.Claim) error {
	status := resourceapply.ResourceClaimStatus()
	for _, d := range c.Devices {
		data, err := json.Marshal(sliceStatus(uid, d))
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("%d MiB and %d%% compute of GPU %s", d.MemoryBytes>>20, d.Fraction, d.GPUUUID)
		switch {
		case d.Sharing == contract.SharingTimeSliced:
			msg = fmt.Sprintf("GPU %s time-sliced, not isolated: no memory limit and no compute share", d.GPUUUID)
		case d.MIG != nil:
			msg = fmt.Sprintf("MIG %s instance %s of GPU %s (GPU instance %d, compute instance %d, %d MiB), isolated by the hardware",
				d.MIG.Profile, d.MIG.UUID, d.GPUUUID, d.MIG.GPUInstance, d.MIG.ComputeInstance, d.MemoryBytes>>20)
		}
		if len(c.Devices) > 1 {
			msg += fmt.Sprintf(", one of the claim's %d GPUs", len(c.Devices))
		}
		dev := resourceapply.AllocatedDeviceStatus().WithDriver(contract.DriverName).WithPool(d.Pool).WithDevice(d.Name)
		if d.ShareID != "" {
			dev.WithShareID(d.ShareID)
		}
		status.WithDevices(dev.
			WithData(runtime.RawExtension{Raw: data}).
			WithConditions(metaapply.Condition().
				WithType(ConditionPrepared).WithStatus(metav1.ConditionTrue).WithReason("SlicePrepared").
				WithMessage(msg).WithLastTransitionTime(metav1.Now())))
	}
	claim := resourceapply.ResourceClaim(c.Name, c.Namespace).
		WithUID(types.UID(uid)). // never the status of a claim recreated under the same name
		WithStatus(status)
	_, err := p.cfg.Client.ResourceV1().ResourceClaims(c.Namespace).ApplyStatus(ctx, claim,
		metav1.ApplyOptions{FieldManager: contract.DriverName + "/" + p.cfg.NodeName, Force: true})
	if err != nil {
		return fmt.Errorf("apply status of claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// reportRefusal writes, in the background, why a claim was not prepared,
// when the reason is what it was allocated (a refusal): each of its
// gpuslice devices gets a Prepared condition that is False, so a tenant
// reading its claim sees why its pod does not start. A claim whose status
// already says so (the kubelet retries) is left alone.
func (p *Plugin) reportRefusal(claim *resourceapi.ResourceClaim, err error) {
	var r *refusal
	if !errors.As(err, &r) || claim.Status.Allocation == nil || refusalReported(claim, r) {
		return
	}
	status := resourceapply.ResourceClaimStatus()
	for _, res := range claim.Status.Allocation.Devices.Results {
		if res.Driver != contract.DriverName {
			continue
		}
		dev := resourceapply.AllocatedDeviceStatus().WithDriver(contract.DriverName).WithPool(res.Pool).WithDevice(res.Device)
		if res.ShareID != nil {
			dev.WithShareID(string(*res.ShareID))
		}
		status.WithDevices(dev.WithConditions(metaapply.Condition().
			WithType(ConditionPrepared).WithStatus(metav1.ConditionFalse).WithReason(r.reason).
			WithMessage(r.msg).WithLastTransitionTime(metav1.Now())))
	}
	apply := resourceapply.ResourceClaim(claim.Name, claim.Namespace).WithUID(claim.UID).WithStatus(status)
	p.log.Info("refused to prepare a claim", "claim", claim.Namespace+"/"+claim.Name, "reason", r.reason, "message", r.msg)
	go func() {
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		defer cancel()
		_, err := p.cfg.Client.ResourceV1().ResourceClaims(claim.Namespace).ApplyStatus(ctx, apply,
			metav1.ApplyOptions{FieldManager: contract.DriverName + "/" + p.cfg.NodeName, Force: true})
		if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			p.log.Error(err, "report the refusal in the claim's status", "claim", claim.Namespace+"/"+claim.Name)
		}
	}()
}

// refusalReported tells whether every gpuslice device of the claim already
// carries the refusal.
func refusalReported(claim *resourceapi.ResourceClaim, r *refusal) bool {
	for _, res := range claim.Status.Allocation.Devices.Results {
		if res.Driver != contract.DriverName {
			continue
		}
		found := false
		for _, d := range claim.Status.Devices {
			if d.Driver == res.Driver && d.Pool == res.Pool && d.Device == res.Device && ptr.Deref(d.ShareID, "") == string(ptr.Deref(res.ShareID, "")) {
				c := meta.FindStatusCondition(d.Conditions, ConditionPrepared)
				found = c != nil && c.Status == metav1.ConditionFalse && c.Reason == r.reason && c.Message == r.msg
			}
		}
		if !found {
			return false
		}
	}
	return true
}
