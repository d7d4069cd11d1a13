package engine

import (
	"context"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/engine/internal/checks"
	"github.com/gpuslice/gpuslice/engine/spec"
)

// consumableCapacity asks the API server whether it has the
// DRAConsumableCapacity feature on: a DeviceClass whose selector reads
// device.allowMultipleAllocations compiles only then. The create is a
// dry run; the answer is kept for the engine's life. nil when the server
// cannot tell (no permission, unreachable).
func (e *Engine) consumableCapacity(ctx context.Context) *bool {
	e.featureOnce.Do(func() {
		dc := &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "gpuslice-feature-probe-"},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: `device.driver == "` + contract.DriverName + `" && device.allowMultipleAllocations`,
			}}}},
		}
		_, err := e.Clients.Typed.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			e.consumable = new(bool)
			*e.consumable = true
		case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "allowMultipleAllocations"):
			e.consumable = new(bool)
		}
	})
	return e.consumable
}

// usesSharedPackage reports whether a workload of the stack uses an
// any-size or time-sliced package the cluster has.
func usesSharedPackage(s *spec.Stack, f *checks.Facts) bool {
	for _, w := range s.Workloads {
		if p, ok := f.Packages[w.Package]; ok && p.Shared() {
			return true
		}
	}
	return false
}
