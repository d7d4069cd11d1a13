package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/discovery"
	"github.com/gpuslice/gpuslice/nodeplugin/enforce"
	"github.com/gpuslice/gpuslice/nodeplugin/shim"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// PrepareResourceClaims prepares each claim: it records the claims as
// PrepareStarted, creates their accounting regions and CDI specs, then
// records them as PrepareCompleted. A claim already completed returns the
// same devices again; a claim left half-prepared by a crash is rolled back
// first.
func (p *Plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	start := time.Now()
	defer func() { p.metrics.PrepareSeconds.Observe(time.Since(start).Seconds()) }()
	unlock, err := p.ckpt.Lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	cp, err := p.loadOrRebuildCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	fail := func(uid string, err error) {
		p.metrics.PrepareErrors.Inc()
		results[types.UID(uid)] = kubeletplugin.PrepareResult{Err: err}
	}
	todo, podsChanged := p.admit(ctx, cp, claims, results, fail)
	if len(todo) == 0 {
		if podsChanged {
			if err := p.saveCheckpoint(cp); err != nil {
				return nil, err
			}
		}
		return results, nil
	}
	if err := p.stageCheckpoint(cp); err != nil {
		return nil, err
	}
	p.notifyAfterStep(StepCheckpointStarted)
	for _, uid := range todo {
		if err := p.carryOut(cp, uid); err != nil {
			fail(uid, err)
			continue
		}
		results[types.UID(uid)] = p.result(uid, cp.Claims[uid])
	}
	if err := p.saveCheckpoint(cp); err != nil {
		return nil, err
	}
	p.notifyAfterStep(StepCheckpointCompleted)
	done := map[string]checkpoint.Claim{}
	for _, uid := range todo {
		if c, ok := cp.Claims[uid]; ok {
			done[uid] = c
		}
	}
	p.reportStatus(done, claims)
	return results, nil
}

// admit records in cp, as PrepareStarted, each of claims that is to be
// prepared, and answers the others in results: one prepared before gets
// the same devices again, one refused or in conflict its error (through
// fail). It returns the claims to prepare, and whether one prepared before
// changed its checkpoint entry (its pods).
func (p *Plugin) admit(ctx context.Context, cp *checkpoint.Checkpoint, claims []*resourceapi.ResourceClaim, results map[types.UID]kubeletplugin.PrepareResult, fail func(uid string, err error)) (todo []string, podsChanged bool) {
	for _, claim := range claims {
		uid := string(claim.UID)
		entry, err := p.checkpointEntry(ctx, claim)
		if err != nil {
			p.reportRefusal(claim, err)
			fail(uid, err)
			continue
		}
		if old, ok := cp.Claims[uid]; !ok || old.State != checkpoint.PrepareCompleted || !slices.Equal(old.Devices, entry.Devices) {
			// a claim prepared before keeps its devices: its pods run
			// on (NoSchedule), only new slices are refused
			if err := p.checkHealthy(claim.Namespace+"/"+claim.Name, entry.Devices); err != nil {
				p.reportRefusal(claim, err)
				fail(uid, err)
				continue
			}
		}
		if old, ok := cp.Claims[uid]; ok {
			if old.State == checkpoint.PrepareCompleted && slices.Equal(old.Devices, entry.Devices) {
				// prepared before (the kubelet retries after restarts)
				changed, err := p.prepareAgain(cp, uid, old, entry)
				if err != nil {
					fail(uid, err)
					continue
				}
				podsChanged = podsChanged || changed
				results[claim.UID] = p.result(uid, old)
				continue
			}
			if err := p.rollback(uid); err != nil {
				fail(uid, err)
				continue
			}
			delete(cp.Claims, uid)
		}
		if err := conflicts(cp, uid, entry, p.gpuMemory); err != nil {
			fail(uid, err)
			continue
		}
		entry.State = checkpoint.PrepareStarted
		cp.Claims[uid] = entry
		todo = append(todo, uid)
	}
	return todo, podsChanged
}

// prepareAgain answers a repeated prepare of a completed claim: the same
// devices, its spec restored if it went missing, and the claim's pods
// updated (a shared claim gains pods, and their processes are its too). It
// reports whether the checkpoint changed.
func (p *Plugin) prepareAgain(cp *checkpoint.Checkpoint, uid string, old, now checkpoint.Claim) (bool, error) {
	if _, err := os.Stat(p.cdi.Path(uid)); err != nil {
		if err := p.writeSpec(uid, old); err != nil {
			return false, err
		}
	}
	if slices.Equal(old.PodUIDs, now.PodUIDs) {
		return false, nil
	}
	old.PodUIDs = now.PodUIDs
	cp.Claims[uid] = old
	return true, nil
}

// carryOut creates a started claim's accounting region and CDI spec and
// marks it completed in cp; on failure it undoes both and drops the claim
// from cp.
func (p *Plugin) carryOut(cp *checkpoint.Checkpoint, uid string) error {
	entry := cp.Claims[uid]
	err := p.createAccounting(uid, entry, false)
	if err == nil {
		p.notifyAfterStep(StepAccountingCreated)
		err = p.writeSpec(uid, entry)
	}
	if err != nil {
		err = fmt.Errorf("prepare claim %s/%s: %w", entry.Namespace, entry.Name, err)
		if rbErr := p.rollback(uid); rbErr != nil {
			err = errors.Join(err, rbErr)
		}
		delete(cp.Claims, uid)
		return err
	}
	p.notifyAfterStep(StepSpecWritten)
	entry.State = checkpoint.PrepareCompleted
	cp.Claims[uid] = entry
	return nil
}

func (p *Plugin) accountingDir(uid string) string { return filepath.Join(p.cfg.AccountingRoot, uid) }

// gpu is the GPU with the UUID, zero if the node has none.
func (p *Plugin) gpu(uuid string) discovery.GPU {
	for _, g := range p.gpus {
		if g.UUID == uuid {
			return g
		}
	}
	return discovery.GPU{}
}

// gpuMemory is the memory of the GPU with the UUID, 0 if the node has none.
func (p *Plugin) gpuMemory(uuid string) uint64 {
	for _, g := range p.gpus {
		if g.UUID == uuid {
			return g.MemoryBytes
		}
	}
	return 0
}

// createAccounting makes the claim's directory, its limits file (the
// limits the shim reads, mounted read-only into the claim's containers) and
// its region; fresh starts over (after a reboot no process of the claim
// survives). A time-sliced claim has no limits to account, a MIG claim's
// the hardware holds.
func (p *Plugin) createAccounting(uid string, c checkpoint.Claim, fresh bool) error {
	if !c.Limited() {
		return nil
	}
	dir := p.accountingDir(uid)
	if fresh {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("reset accounting dir: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create accounting dir: %w", err)
	}
	window := shim.DefaultComputeWindowMS * time.Millisecond
	err := accounting.WriteLimits(filepath.Join(dir, contract.LimitsFile), accounting.Limits{
		MemoryLimit: c.MemoryBytes(), ComputeShare: uint32(c.Fraction()), ComputeWindow: window,
		SamplePeriod: enforce.Period, ContextOverhead: shim.DefaultContextOverhead, Created: time.Now(),
	})
	if err != nil {
		return fmt.Errorf("create the claim's limits file: %w", err)
	}
	return p.createRegion(uid, c, filepath.Join(dir, contract.RegionFile), window)
}

// createRegion makes the claim's region if it is missing. An existing one
// is the claim's processes' own to write (its directory is writable in
// their containers), so what they did to it is never a reason to stop
// restoring the node's claims: a symlink, FIFO or directory put in its
// place is removed (never followed: the plugin runs on the host) and the
// region made afresh; a region whose content is unusable is left to the
// library, which reinitialises it once no process is attached, and refuses
// that claim's allocations until then. Either way only that claim is
// affected, and the limits file and the enforcer still hold it.
func (p *Plugin) createRegion(uid string, c checkpoint.Claim, path string, window time.Duration) error {
	err := accounting.Create(path, c.MemoryBytes(), uint32(c.Fraction()), false, window)
	if errors.Is(err, accounting.ErrNotRegularFile) {
		p.log.Info("replacing what a container of the claim put in place of its accounting region", "claim", c.Namespace+"/"+c.Name, "uid", uid, "detail", err.Error())
		if rmErr := os.RemoveAll(path); rmErr != nil {
			return fmt.Errorf("remove what replaced the accounting region: %w", rmErr)
		}
		err = accounting.Create(path, c.MemoryBytes(), uint32(c.Fraction()), false, window)
	}
	if errors.Is(err, accounting.ErrUnusableRegion) {
		p.log.Info("the claim's accounting region is unusable: its processes wrote it; the library reinitialises it once none is attached", "claim", c.Namespace+"/"+c.Name, "uid", uid, "detail", err.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("create accounting region: %w", err)
	}
	return nil
}

// writeSpec writes the claim's one CDI spec: every GPU of the claim, and
// the claim's limits (see limitsOf in allocation.go for whole GPUs), or its
// MIG instance.
func (p *Plugin) writeSpec(uid string, c checkpoint.Claim) error {
	gpus := make([]cdispec.GPU, 0, len(c.Devices))
	var mig *cdispec.MIG
	for _, d := range c.Devices {
		g := p.gpu(d.GPUUUID)
		gpu := cdispec.GPU{UUID: d.GPUUUID, Minor: d.GPUMinor, Model: g.Name, ComputeCapability: fmt.Sprintf("%d.%d", g.CCMajor, g.CCMinor)}
		if p.cfg.SimulatedGPUState != nil && d.MIG == nil {
			gpu.SimulatedState = p.cfg.SimulatedGPUState(d.GPUUUID)
		}
		gpus = append(gpus, gpu)
		if m := d.MIG; m != nil {
			mig = &cdispec.MIG{UUID: m.UUID, Profile: m.Profile, MemoryBytes: d.MemoryBytes, GPUInstance: m.GPUInstance, ComputeInstance: m.ComputeInstance}
		}
	}
	spec, err := cdispec.Build(cdispec.Slice{
		ClaimUID: uid, GPUs: gpus, Unlimited: !c.Limited(), MemoryBytes: c.MemoryBytes(), Fraction: c.Fraction(), AccountingDir: p.accountingDir(uid), MIG: mig,
	}, p.host)
	if err != nil {
		return err
	}
	return p.cdi.Write(uid, spec)
}

// rollback removes whatever a prepare of the claim left on the node.
func (p *Plugin) rollback(uid string) error {
	err := p.cdi.Remove(uid)
	if rmErr := os.RemoveAll(p.accountingDir(uid)); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove accounting dir of claim %s: %w", uid, rmErr))
	}
	return err
}

// removeLeftovers removes a spec and accounting dir the checkpoint does not
// record, if the claim has any.
func (p *Plugin) removeLeftovers(uid string) error {
	_, specErr := os.Stat(p.cdi.Path(uid))
	_, dirErr := os.Lstat(p.accountingDir(uid))
	if errors.Is(specErr, os.ErrNotExist) && errors.Is(dirErr, os.ErrNotExist) {
		return nil
	}
	p.log.Info("removing the files of a claim the checkpoint does not hold, unprepared by the kubelet", "uid", uid)
	return p.rollback(uid)
}

// UnprepareResourceClaims removes each claim's spec, accounting directory
// and checkpoint entry. Claims not prepared here are not an error.
func (p *Plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	start := time.Now()
	defer func() { p.metrics.UnprepareSeconds.Observe(time.Since(start).Seconds()) }()
	unlock, err := p.ckpt.Lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	cp, err := p.loadOrRebuildCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	results := make(map[types.UID]error, len(claims))
	changed := false
	for _, c := range claims {
		uid := string(c.UID)
		results[c.UID] = nil
		if _, ok := cp.Claims[uid]; !ok {
			// Not prepared here, or left out of a rebuilt checkpoint with
			// its files kept while its container ran: they go now.
			if err := p.removeLeftovers(uid); err != nil {
				p.metrics.UnprepareErrors.Inc()
				results[c.UID] = fmt.Errorf("unprepare claim %s: %w", c, err)
			}
			continue
		}
		if err := p.rollback(uid); err != nil {
			p.metrics.UnprepareErrors.Inc()
			results[c.UID] = fmt.Errorf("unprepare claim %s: %w", c, err)
			continue
		}
		p.notifyAfterStep(StepUnprepareRemoved)
		delete(cp.Claims, uid)
		changed = true
	}
	if changed {
		if err := p.saveCheckpoint(cp); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// stageCheckpoint records claims as started without waiting for the disk
// (see checkpoint.File.Stage for why that is safe).
func (p *Plugin) stageCheckpoint(cp *checkpoint.Checkpoint) error {
	cp.BootID = p.bootID
	if err := p.ckpt.Stage(cp); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", p.ckpt.Path(), err)
	}
	p.updateClaimMetrics(cp)
	return nil
}

// saveCheckpoint writes cp durably and updates the claim metrics from it.
func (p *Plugin) saveCheckpoint(cp *checkpoint.Checkpoint) error {
	cp.BootID = p.bootID
	if err := p.ckpt.Save(cp); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", p.ckpt.Path(), err)
	}
	p.updateClaimMetrics(cp)
	return nil
}
