package driver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/internal/kubeletsim"
	"github.com/gpuslice/gpuslice/nodeplugin/cdispec"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/driver"
	"github.com/gpuslice/gpuslice/nodeplugin/shim/accounting"
)

// TestLeftOutClaimKeepsFiles: a rebuilt checkpoint leaves
// out a claim it cannot check (here its package's DeviceClass is gone),
// but the claim is still allocated here and its pod still runs: its CDI
// spec and accounting (region and limits) stay, at the rebuild and at
// every start after it, and go when the kubelet unprepares the claim.
func TestLeftOutClaimKeepsFiles(t *testing.T) {
	const node = "leftout"
	e := newEnv(t, node)
	cfg, uid := preparedClaim(t, e, node)
	files := []string{
		filepath.Join(cfg.CDIDir, cdispec.SpecName(uid)),
		filepath.Join(cfg.AccountingRoot, uid, contract.RegionFile),
		filepath.Join(cfg.AccountingRoot, uid, contract.LimitsFile),
	}
	region, err := accounting.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := e.client.ResourceV1().DeviceClasses().Delete(e.ctx, fmt.Sprintf("%s-%dpct", e.ns, 25), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(cfg.StateDir, checkpoint.Name)
	data, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x20
	if err := os.WriteFile(ckpt, data, 0o600); err != nil {
		t.Fatal(err)
	}

	requireKept := func(when string) {
		t.Helper()
		for _, f := range files {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("%s, the file of claim %s, which the checkpoint left out while its pod runs, is gone: %v", when, uid, err)
			}
		}
		if got, err := accounting.ReadFile(files[1]); err != nil || !got.Created.Equal(region.Created) || got.MemoryLimit != region.MemoryLimit {
			t.Errorf("%s, the claim's region was replaced: %+v, %v; want the one its container uses (created %v)", when, got, err, region.Created)
		}
	}
	p, err := driver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := mustCheckpoint(t, cfg.StateDir).Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cp.Claims[uid]; ok {
		t.Fatalf("the rebuild kept claim %s, whose package is gone: the test needs it left out", uid)
	}
	requireKept("after the rebuild")
	p.Stop()

	p, err = driver.Start(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	requireKept("after a restart on the rebuilt checkpoint")

	k, err := kubeletsim.Dial(cfg.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	claims, err := e.client.ResourceV1().ResourceClaims(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) != 1 || claims.Items[0].UID != types.UID(uid) {
		t.Fatalf("claims in %s: %v, %v; want the one prepared", e.ns, claims, err)
	}
	if err := k.Unprepare(e.ctx, &claims.Items[0]); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, filepath.Join(cfg.AccountingRoot, uid)) {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("after the kubelet unprepared claim %s, %s is still there (%v)", uid, f, err)
		}
	}
}
