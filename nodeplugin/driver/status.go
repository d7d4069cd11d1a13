package driver

import (
	"context"
	"encoding/json"
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

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// SliceStatus is what the plugin reports in a prepared claim's
// status.devices[].data: tenants cannot look at the node, but they can read
// their claim to see which GPU and which limits their containers got.
type SliceStatus struct {
	GPUUUID             string `json:"gpuUUID"`
	GPUIndex            int    `json:"gpuIndex"`
	MemoryLimitBytes    uint64 `json:"memoryLimitBytes"`
	ComputeSharePercent int    `json:"computeSharePercent"`
	CDIDevice           string `json:"cdiDevice"`
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

func sliceStatus(uid string, c checkpoint.Claim) SliceStatus {
	return SliceStatus{
		GPUUUID: c.GPUUUID, GPUIndex: c.GPUIndex, MemoryLimitBytes: c.MemoryBytes, ComputeSharePercent: c.Fraction, CDIDevice: cdispec.DeviceID(uid),
	}
}

// reported tells whether the claim's status already holds this slice.
func reported(obj *resourceapi.ResourceClaim, uid string, c checkpoint.Claim) bool {
	for _, d := range obj.Status.Devices {
		if d.Driver != contract.DriverName || d.Pool != c.Pool || d.Device != c.Device || d.Data == nil {
			continue
		}
		var have SliceStatus
		return json.Unmarshal(d.Data.Raw, &have) == nil && have == sliceStatus(uid, c) &&
			meta.IsStatusConditionTrue(d.Conditions, ConditionPrepared)
	}
	return false
}

func (p *Plugin) applyStatus(ctx context.Context, uid string, c checkpoint.Claim) error {
	data, err := json.Marshal(sliceStatus(uid, c))
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("%d MiB and %d%% compute of GPU %s", c.MemoryBytes>>20, c.Fraction, c.GPUUUID)
	claim := resourceapply.ResourceClaim(c.Name, c.Namespace).
		WithUID(types.UID(uid)). // never the status of a claim recreated under the same name
		WithStatus(resourceapply.ResourceClaimStatus().WithDevices(
			resourceapply.AllocatedDeviceStatus().
				WithDriver(contract.DriverName).WithPool(c.Pool).WithDevice(c.Device).
				WithData(runtime.RawExtension{Raw: data}).
				WithConditions(metaapply.Condition().
					WithType(ConditionPrepared).WithStatus(metav1.ConditionTrue).WithReason("SlicePrepared").
					WithMessage(msg).WithLastTransitionTime(metav1.Now())),
		))
	_, err = p.cfg.Client.ResourceV1().ResourceClaims(c.Namespace).ApplyStatus(ctx, claim,
		metav1.ApplyOptions{FieldManager: contract.DriverName + "/" + p.cfg.NodeName, Force: true})
	if err != nil {
		return fmt.Errorf("apply status of claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}
