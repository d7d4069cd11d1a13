package driver

import (
	"context"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuslice/gpuslice/contract"
	"github.com/gpuslice/gpuslice/nodeplugin/checkpoint"
	"github.com/gpuslice/gpuslice/nodeplugin/enforce"
)

// The enforcer holds the prepared claims the shim limits, each GPU to the
// claim's memory there: not a time-sliced claim, a MIG one or one still
// being prepared.
func TestClaimsToEnforce(t *testing.T) {
	p := &Plugin{cfg: Config{AccountingRoot: "/run/gpuslice/claims"}, prepared: map[string]checkpoint.Claim{
		"part": {State: checkpoint.PrepareCompleted, Namespace: "a", Name: "p", PodUIDs: []string{"pod-1"},
			Devices: []checkpoint.Device{{GPUUUID: "GPU-0", MemoryBytes: 8 << 30, Fraction: 25}}},
		"whole": {State: checkpoint.PrepareCompleted, Namespace: "a", Name: "w",
			Devices: []checkpoint.Device{{GPUUUID: "GPU-0", MemoryBytes: 32 << 30, Fraction: 100}, {GPUUUID: "GPU-1", MemoryBytes: 32 << 30, Fraction: 100}}},
		"shared":   {State: checkpoint.PrepareCompleted, Devices: []checkpoint.Device{{GPUUUID: "GPU-0", Sharing: contract.SharingTimeSliced, Shares: 1}}},
		"mig":      {State: checkpoint.PrepareCompleted, Devices: []checkpoint.Device{{GPUUUID: "GPU-0", Sharing: contract.SharingMIG, MIG: &checkpoint.MIGInstance{UUID: "MIG-1"}}}},
		"starting": {State: checkpoint.PrepareStarted, Devices: []checkpoint.Device{{GPUUUID: "GPU-0", MemoryBytes: 8 << 30, Fraction: 25}}},
	}}
	got := map[string]enforce.Claim{}
	for _, c := range p.claimsToEnforce() {
		got[c.UID] = c
	}
	if len(got) != 2 {
		t.Fatalf("claims enforced: %+v, want the partition and the whole GPUs only", got)
	}
	if c := got["part"]; c.LimitsFile != "/run/gpuslice/claims/part/gpuslice.limits" || len(c.GPUs) != 1 || c.GPUs[0] != (enforce.GPU{UUID: "GPU-0", Limit: 8 << 30}) ||
		len(c.PodUIDs) != 1 || c.PodUIDs[0] != "pod-1" {
		t.Errorf("partition: %+v", c)
	}
	if c := got["whole"]; len(c.GPUs) != 2 || c.GPUs[1] != (enforce.GPU{UUID: "GPU-1", Limit: 32 << 30}) {
		t.Errorf("whole GPUs: %+v", c)
	}
}

// A kill is a Warning event on the pod (its name found in the claim's
// reservations), naming the process as the tenant sees it, its memory and
// the claim's limit; a failed kill records nothing.
func TestKillEvent(t *testing.T) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "slice", UID: "claim-1"},
		Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{
			{Resource: "pods", Name: "other", UID: "pod-0"}, {Resource: "pods", Name: "trainer", UID: "pod-1"}}}}
	client := fake.NewClientset(claim)
	p := &Plugin{ctx: context.Background(), cfg: Config{Client: client, NodeName: "node-1"}}
	k := enforce.Kill{
		Claim: enforce.Claim{UID: "claim-1", Namespace: "team-a", Name: "slice"}, GPU: "GPU-0", PodUID: "pod-1",
		Process:   enforce.Process{PID: 4242, Used: 10 << 30, Grew: 10 << 30, Command: "bypass", ContainerPID: 7},
		ClaimUsed: 10 << 30, Limit: 8 << 30, At: time.Now(),
	}
	if err := p.killEvent(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	list, err := client.EventsV1().Events("team-a").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("events %+v, %v", list, err)
	}
	ev := list.Items[0]
	if ev.Type != "Warning" || ev.Reason != EventReasonMemoryLimitExceeded || ev.Regarding.Kind != "Pod" || ev.Regarding.Name != "trainer" ||
		ev.Regarding.UID != "pod-1" || ev.Related == nil || ev.Related.Name != "slice" || ev.ReportingInstance != "gpuslice-nodeplugin-node-1" {
		t.Errorf("event %+v", ev)
	}
	for _, want := range []string{"process 7 (bypass)", "GPU-0", "held 10240 MiB", "claim slice used 10240 MiB of its 8192 MiB limit", "use a package with more memory"} {
		if !strings.Contains(ev.Note, want) {
			t.Errorf("event note %q lacks %q", ev.Note, want)
		}
	}
	if len(ev.Note) > 1024 {
		t.Errorf("event note is %d bytes; the API refuses more than 1 KiB", len(ev.Note))
	}
	k.Err = enforce.ErrGone
	p.reportKill(k) // nothing to report: returns before any goroutine
	if list, _ := client.EventsV1().Events("team-a").List(context.Background(), metav1.ListOptions{}); len(list.Items) != 1 {
		t.Errorf("a failed kill recorded an event: %+v", list.Items)
	}
}
