package status

import "testing"

// A finished Job keeps what it ran on (its claims are gone from the
// cluster); anything else is what the cluster says now.
func TestKeepingWhatAFinishedJobRanOn(t *testing.T) {
	ran := RanOn{Claim: "evals-0-gpu-abc", Node: "fleet-v100", Device: "gpu-1-50pct-0"}
	done := Status{Phase: Succeeded, Reason: Completed, Message: "the job completed"}
	if got := done.Keeping(ran); got.RanOn() != ran || got.Phase != Succeeded || got.Message != "the job completed" {
		t.Errorf("finished job kept %+v, want %+v", got, ran)
	}
	for _, st := range []Status{
		{Phase: Pending, Reason: WaitingForSlice},                      // waiting again: on nothing
		{Phase: Failed, Reason: JobFailed},                             // failed: not kept
		{Phase: Missing, Reason: NotApplied},                           // deleted: nothing to keep
		{Phase: Succeeded, Reason: Completed, Node: "n", Device: "d2"}, // the cluster still says
	} {
		if got := st.Keeping(ran); got.RanOn() != st.RanOn() {
			t.Errorf("%s (%s) became %+v, want %+v", st.Phase, st.Reason, got.RanOn(), st.RanOn())
		}
	}
}
