package view

// Subscribe returns a channel that receives (coalesced) whenever any
// informer sees a change, and a function ending the subscription. The view
// follows the cluster from then on (Follow).
func (v *View) Subscribe() (<-chan struct{}, func()) {
	v.Follow()
	ch := make(chan struct{}, 1)
	v.subsMu.Lock()
	v.subs[ch] = struct{}{}
	v.subsMu.Unlock()
	return ch, func() {
		v.subsMu.Lock()
		delete(v.subs, ch)
		v.subsMu.Unlock()
	}
}

func (v *View) broadcast() {
	v.subsMu.Lock()
	defer v.subsMu.Unlock()
	for ch := range v.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
