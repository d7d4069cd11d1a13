package status

// RanOn is where a workload's first replica ran: its claim, node and
// device.
type RanOn struct{ Claim, Node, Device string }

// RanOn is where s says the first replica runs; zero when it does not say.
func (s Status) RanOn() RanOn { return RanOn{Claim: s.Claim, Node: s.Node, Device: s.Device} }

// Keeping is s with what a finished Job ran on, from before, when the
// cluster no longer says: the claims of finished pods are released and
// deleted, so a completed Job's diagnosis names no claim, node or device.
// Kept, the workload's attributes (and the outputs that name them) stay
// what they were while it ran, and a plan after the Job finishes has
// nothing to change.
func (s Status) Keeping(before RanOn) Status {
	if s.Phase == Succeeded && s.RanOn() == (RanOn{}) {
		s.Claim, s.Node, s.Device = before.Claim, before.Node, before.Device
	}
	return s
}
