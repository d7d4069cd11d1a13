package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
)

// reconcileWithCheckpoint brings the node in line with the checkpoint before
// the kubelet can call: interrupted prepares are rolled back, completed
// claims get their specs rewritten (with the current shim library) and,
// after a reboot, fresh accounting regions; files of claims the checkpoint
// does not know are removed.
func (p *Plugin) reconcileWithCheckpoint(ctx context.Context) error {
	unlock, err := p.ckpt.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	cp, err := p.loadOrRebuildCheckpoint(ctx)
	if err != nil {
		return err
	}
	rebooted := cp.BootID != "" && cp.BootID != p.bootID
	if rebooted {
		p.log.Info("node rebooted since the checkpoint was written: recreating the specs of prepared claims", "previousBootID", cp.BootID, "bootID", p.bootID)
	}
	for uid, c := range cp.Claims {
		if c.State != checkpoint.PrepareCompleted {
			p.log.Info("rolling back an interrupted prepare", "claim", c.Namespace+"/"+c.Name, "uid", uid)
			if err := p.rollback(uid); err != nil {
				return fmt.Errorf("roll back interrupted prepare of claim %s/%s: %w", c.Namespace, c.Name, err)
			}
			delete(cp.Claims, uid)
			continue
		}
		if err := p.createAccounting(uid, c, rebooted); err != nil {
			return fmt.Errorf("restore claim %s/%s: %w", c.Namespace, c.Name, err)
		}
		if err := p.writeSpec(uid, c); err != nil {
			return fmt.Errorf("restore claim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	if err := p.removeOrphans(ctx, cp); err != nil {
		return err
	}
	return p.saveCheckpoint(cp)
}

// removeOrphans deletes specs and accounting dirs of claims the checkpoint
// does not hold (left by a checkpoint that was lost or rebuilt), except
// those of claims the API server shows allocated here and in use: a
// rebuild leaves out a claim it cannot check (its package unreadable, its
// device no longer offered) whose container still runs on that spec and
// accounts in that dir. Their files go when the kubelet unprepares them.
// When the API server cannot tell, every such file stays until a later
// start or the claim's unprepare.
func (p *Plugin) removeOrphans(ctx context.Context, cp *checkpoint.Checkpoint) error {
	prefix := strings.TrimSuffix(cdispec.SpecName("X"), "X.json")
	entries, err := os.ReadDir(p.cfg.CDIDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("list CDI specs: %w", err)
	}
	var specs, dirs []string
	for _, e := range entries {
		uid, ok := strings.CutPrefix(e.Name(), prefix)
		uid, json := strings.CutSuffix(uid, ".json")
		if _, known := cp.Claims[uid]; ok && json && !known {
			specs = append(specs, uid)
		}
	}
	accounting, err := os.ReadDir(p.cfg.AccountingRoot)
	if err != nil {
		return fmt.Errorf("list accounting dirs: %w", err)
	}
	for _, d := range accounting {
		if _, known := cp.Claims[d.Name()]; !known && d.IsDir() {
			dirs = append(dirs, d.Name())
		}
	}
	if len(specs) == 0 && len(dirs) == 0 {
		return nil
	}
	inUse := map[string]bool{}
	claims, err := p.claimsInUseHere(ctx)
	if err != nil {
		p.log.Error(err, "keeping the files of claims the checkpoint does not hold: the API server cannot tell whether their containers still run", "specs", specs, "accountingDirs", dirs)
		return nil
	}
	for _, c := range claims {
		inUse[string(c.UID)] = true
		if _, known := cp.Claims[string(c.UID)]; !known {
			p.log.Info("keeping the files of a claim in use on this node that the checkpoint does not hold; they go when the kubelet unprepares it", "claim", c.Namespace+"/"+c.Name, "uid", c.UID)
		}
	}
	for _, uid := range specs {
		if !inUse[uid] {
			p.log.Info("removing the CDI spec of a claim not prepared here", "uid", uid)
			if err := p.cdi.Remove(uid); err != nil {
				return err
			}
		}
	}
	for _, uid := range dirs {
		if !inUse[uid] {
			p.log.Info("removing the accounting dir of a claim not prepared here", "uid", uid)
			if err := os.RemoveAll(p.accountingDir(uid)); err != nil {
				return fmt.Errorf("remove stale accounting dir: %w", err)
			}
		}
	}
	return nil
}

// claimsInUseHere lists the claims allocated to this node's devices and
// reserved for a pod: those the kubelet has prepared or will.
func (p *Plugin) claimsInUseHere(ctx context.Context) ([]*resourceapi.ResourceClaim, error) {
	list, err := p.cfg.Client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list resource claims: %w", err)
	}
	var out []*resourceapi.ResourceClaim
	for i := range list.Items {
		claim := &list.Items[i]
		if claim.Status.Allocation == nil || len(claim.Status.ReservedFor) == 0 {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver == contract.DriverName && r.Pool == p.cfg.NodeName {
				out = append(out, claim)
				break
			}
		}
	}
	return out, nil
}

// EventReasonCheckpointRebuilt is the reason of the Warning event a plugin
// records on its Node when it rebuilt its checkpoint from the API server.
const EventReasonCheckpointRebuilt = "CheckpointRebuilt"

// loadOrRebuildCheckpoint reads the checkpoint. A corrupt one, or one in a
// format this plugin does not know (written by a newer plugin before a
// rollback), is reported (log, metric, Event on the Node), kept beside for
// inspection and rebuilt from the API server's view of the claims
// allocated on this node and in use: the plugin keeps serving rather than
// crash-looping until someone moves the file.
func (p *Plugin) loadOrRebuildCheckpoint(ctx context.Context) (*checkpoint.Checkpoint, error) {
	cp, err := p.ckpt.Load()
	if err == nil {
		return cp, nil
	}
	reason, keepAs := "corrupt", ".corrupt"
	switch {
	case errors.Is(err, checkpoint.ErrCorrupt):
		p.metrics.CheckpointErrors.Inc()
	case errors.Is(err, checkpoint.ErrUnsupportedVersion):
		reason, keepAs = "unknown-format", ".unknown-format"
	default:
		return nil, err
	}
	p.metrics.CheckpointRebuilds.WithLabelValues(reason).Inc()
	p.log.Error(err, "rebuilding the checkpoint from the API server's view of the claims allocated on this node", "reason", reason)
	cp, rebuildErr := p.rebuildCheckpoint(ctx)
	if rebuildErr != nil {
		return nil, fmt.Errorf("%w; rebuilding it from the API server failed: %v (the plugin retries; or remove %s once no pod on the node uses a GPU slice)", err, rebuildErr, p.ckpt.Path())
	}
	_ = os.Rename(p.ckpt.Path(), p.ckpt.Path()+keepAs) // kept for a person to inspect
	p.nodeWarning(ctx, "checkpoint-", "RebuildCheckpoint", EventReasonCheckpointRebuilt, fmt.Sprintf(
		"The node plugin's checkpoint could not be read (%s: %v); it was rebuilt from the API server with %d prepared claims and kept as %s%s",
		reason, err, len(cp.Claims), p.ckpt.Path(), keepAs))
	for uid, c := range cp.Claims {
		if err := p.createAccounting(uid, c, false); err != nil {
			return nil, err
		}
		if err := p.writeSpec(uid, c); err != nil {
			return nil, err
		}
	}
	if err := p.saveCheckpoint(cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// rebuildCheckpoint records the claims in use on this node as prepared. A
// claim it cannot check is left out (and refused at its next prepare);
// removeOrphans keeps its files while its container runs.
func (p *Plugin) rebuildCheckpoint(ctx context.Context) (*checkpoint.Checkpoint, error) {
	claims, err := p.claimsInUseHere(ctx)
	if err != nil {
		return nil, err
	}
	cp := checkpoint.New(p.bootID)
	for _, claim := range claims {
		entry, err := p.checkpointEntry(ctx, claim)
		if err != nil {
			p.log.Error(err, "claim left out of the rebuilt checkpoint")
			continue
		}
		entry.State = checkpoint.PrepareCompleted
		cp.Claims[string(claim.UID)] = entry
	}
	return cp, nil
}
