package driver

import (
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpuslice/gpuslice/nodeplugin/health"
)

// TestUnhealthyTaintEscalates: the taint is NoSchedule, added when the GPU
// turned unhealthy, until --health-evict-after has passed; then NoExecute,
// added at that moment; with 0 it never turns NoExecute.
func TestUnhealthyTaintEscalates(t *testing.T) {
	since := time.Date(2026, 12, 6, 18, 0, 0, 0, time.UTC)
	f := health.Fault{Reason: "xid-79", Since: since, Last: since.Add(time.Minute)}
	for _, c := range []struct {
		evictAfter, at time.Duration
		effect         resourcev1.DeviceTaintEffect
		added          time.Time
	}{
		{0, 24 * time.Hour, resourcev1.DeviceTaintEffectNoSchedule, since},
		{10 * time.Minute, 10*time.Minute - time.Nanosecond, resourcev1.DeviceTaintEffectNoSchedule, since},
		{10 * time.Minute, 10 * time.Minute, resourcev1.DeviceTaintEffectNoExecute, since.Add(10 * time.Minute)},
		{10 * time.Minute, time.Hour, resourcev1.DeviceTaintEffectNoExecute, since.Add(10 * time.Minute)},
	} {
		got := unhealthyTaint(f, c.evictAfter, since.Add(c.at))
		if got.Effect != c.effect || !got.TimeAdded.Time.Equal(c.added) || got.Value != "xid-79" {
			t.Errorf("evict after %v, %v after the fault: %s=%s:%s added %v, want %s added %v", c.evictAfter, c.at, got.Key, got.Value, got.Effect, got.TimeAdded, c.effect, c.added)
		}
	}
}

// A negative --health-evict-after or --health-recovery is refused, naming
// the flag, rather than taken as "never" or as the default.
func TestNegativeHealthDurationsRefused(t *testing.T) {
	c := Config{HealthEvictAfter: -time.Second, HealthRecovery: -time.Minute}
	err := c.validate()
	for _, want := range []string{"--health-evict-after -1s: must be 0 (never evict: running pods finish) or positive", "--health-recovery -1m0s: must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v; want %q", err, want)
		}
	}
}
