package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// The reasons of a refused claim's Prepared condition.
const (
	// ReasonNotItsPackage: the allocation is not exactly one slice of the
	// package the claim's request names, or the class is not a package.
	ReasonNotItsPackage = "NotItsPackage"
	// ReasonPackageUnreadable: the plugin could not read the request's
	// DeviceClass, or could not make sense of its annotations.
	ReasonPackageUnreadable = "PackageUnreadable"
)

// refusal is a prepare refused because of what the claim was allocated:
// the tenant reads it in the claim's status and in the pod's events.
type refusal struct {
	reason string
	msg    string
}

func (r *refusal) Error() string { return r.msg }

// again ends a refusal the tenant can fix: the claim's devices stay
// allocated to it until its pod goes.
const again = "; then delete the pod so its claim is allocated again"

// checkPackages holds each request's gpuslice devices to the package its
// DeviceClass describes: exactly one slice of it (or N whole GPUs of a
// whole-GPU package), whatever the scheduler allocated. Admission refuses
// other claims first; this holds where admission did not run (its
// policies deleted, a namespace they do not bind, the scheduler's own
// claims for extended resources).
func (p *Plugin) checkPackages(ctx context.Context, claim *resourceapi.ResourceClaim, devs []checkpoint.Device) error {
	ref := claim.Namespace + "/" + claim.Name
	var requests []string
	byRequest := map[string][]checkpoint.Device{}
	for _, d := range devs {
		if _, ok := byRequest[d.Request]; !ok {
			requests = append(requests, d.Request)
		}
		byRequest[d.Request] = append(byRequest[d.Request], d)
	}
	for _, req := range requests {
		class, ok := requestClass(claim, req)
		if !ok {
			return &refusal{ReasonNotItsPackage, fmt.Sprintf("claim %s was allocated gpuslice devices for request %q, which its spec does not have; delete the pod so its claim is allocated again", ref, req)}
		}
		if err := p.checkRequest(ctx, ref, req, class, byRequest[req]); err != nil {
			return err
		}
	}
	return nil
}

// requestClass is the DeviceClass a request (or a firstAvailable
// subrequest, "request/sub") of the claim names.
func requestClass(claim *resourceapi.ResourceClaim, name string) (string, bool) {
	main, sub, isSub := strings.Cut(name, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name != main {
			continue
		}
		if !isSub {
			if r.Exactly == nil {
				return "", false
			}
			return r.Exactly.DeviceClassName, true
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return s.DeviceClassName, true
			}
		}
	}
	return "", false
}

// checkRequest checks a request's devices against its class, read from the
// cache when that admits them; a refusal always rests on the class as the
// API server has it now, never on a cached copy that may be stale.
func (p *Plugin) checkRequest(ctx context.Context, ref, req, class string, devs []checkpoint.Device) error {
	if dc := p.classes.cached(class); dc != nil && p.admits(ref, req, dc, devs) == nil {
		return nil
	}
	dc, err := p.classes.get(ctx, class)
	if err != nil {
		which, advice := "which the node plugin cannot read now", "; the kubelet tries again"
		switch {
		case apierrors.IsNotFound(err):
			which, advice = "which does not exist (was its package removed?)", ": use a package your namespace is granted"+again
		case apierrors.IsForbidden(err):
			which, advice = "which the node plugin may not read", ": the platform team must grant gpuslice-nodeplugin get, list and watch on deviceclasses (install its chart or manifests again)"
		}
		return &refusal{ReasonPackageUnreadable, fmt.Sprintf("claim %s: request %q names DeviceClass %s, %s, and gpuslice prepares no slice it cannot check against its package (%v)%s",
			ref, req, class, which, err, advice)}
	}
	return p.admits(ref, req, dc, devs)
}

// admits checks the devices of one request against the package dc is the
// class of.
func (p *Plugin) admits(ref, req string, dc *resourceapi.DeviceClass, devs []checkpoint.Device) error {
	pkg, err := packageOf(dc)
	if errors.As(err, new(errNotAPackage)) {
		return &refusal{ReasonNotItsPackage, fmt.Sprintf("claim %s: request %q names DeviceClass %s, which is not a gpuslice package (it has no %s label): "+
			"gpuslice prepares only slices of its packages; use a package your namespace is granted (its ResourceQuota names their classes)%s",
			ref, req, dc.Name, contract.LabelPackage, again)}
	}
	if err != nil {
		return &refusal{ReasonPackageUnreadable, fmt.Sprintf("claim %s: request %q: %v", ref, req, err)}
	}
	refuse := func(got, hint string) error {
		return &refusal{ReasonNotItsPackage, fmt.Sprintf("claim %s: request %q asks for package %s (%s) but was allocated %s: gpuslice prepares exactly one slice of the claim's package. %s",
			ref, req, pkg.class, pkg, got, hint)}
	}
	if len(devs) > 1 && (pkg.kind != contract.SharingPartition || pkg.fraction != contract.ComputeWhole) {
		names := make([]string, len(devs))
		for i, d := range devs {
			names[i] = d.Name
		}
		return refuse(fmt.Sprintf("%d devices (%s)", len(devs), strings.Join(names, ", ")),
			"Ask for one device (count 1) per claim: several slices are several claims, and only a whole-GPU package gives one claim several GPUs"+again)
	}
	for _, d := range devs {
		model := p.devices[d.Name].GPU.Name
		if sameSlice(pkg, d, model) {
			continue
		}
		got := allocatedOf(d, model)
		if d.Sharing == pkg.kind && model == pkg.model && (pkg.kind == contract.SharingAnySize || pkg.kind == contract.SharingTimeSliced) {
			return refuse(got, "Claim it as the package's claim template does, which a gpuslice workload does for you: "+capacityOf(pkg)+
				", no other amounts and not through an extended resource; or use a package of the size you need"+again)
		}
		return refuse(got, "The class's selector does not match its package (was the class edited, or replaced after the claim was allocated?): "+
			"delete the pod so its claim is allocated again, and if this recurs, ask the platform team to apply the package again")
	}
	return nil
}

// sameSlice tells whether the allocated device is exactly a slice of pkg.
func sameSlice(pkg slicePackage, d checkpoint.Device, model string) bool {
	if model != pkg.model {
		return false
	}
	switch pkg.kind {
	case contract.SharingPartition:
		return d.Partition() && d.Fraction == pkg.fraction
	case contract.SharingAnySize:
		return d.Sharing == contract.SharingAnySize && d.MemoryBytes == uint64(pkg.memory) && d.Fraction == pkg.compute
	case contract.SharingTimeSliced:
		return d.Sharing == contract.SharingTimeSliced && d.Shares == pkg.shares
	case contract.SharingMIG:
		return d.MIG != nil && d.MIG.Profile == pkg.migProfile
	}
	return false
}

// allocatedOf says what the device gives its claim.
func allocatedOf(d checkpoint.Device, model string) string {
	switch {
	case d.MIG != nil:
		return fmt.Sprintf("device %s, a MIG %s instance of a %s", d.Name, d.MIG.Profile, model)
	case d.Partition():
		return fmt.Sprintf("device %s, a %d%% slice of a %s", d.Name, d.Fraction, model)
	case d.Sharing == contract.SharingAnySize:
		return fmt.Sprintf("%s of memory and %d%% compute of device %s, the any-size device of a %s", bytesString(int64(d.MemoryBytes)), d.Fraction, d.Name, model)
	}
	whole := ""
	if d.Shares == contract.TimeSliceShares {
		whole = " (all of them)"
	}
	return fmt.Sprintf("%d shares%s of device %s, the time-sliced device of a %s", d.Shares, whole, d.Name, model)
}

// capacityOf is the capacity a claim of the shared package asks for.
func capacityOf(pkg slicePackage) string {
	if pkg.kind == contract.SharingTimeSliced {
		return fmt.Sprintf("capacity %s: %d", contract.CapacityShares, pkg.shares)
	}
	return fmt.Sprintf("capacity %s: %s and %s: %d", contract.CapacityMemory, bytesString(pkg.memory), contract.CapacityCompute, pkg.compute)
}
