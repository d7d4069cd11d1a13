package engine

import "github.com/gpuslice/gpuslice/engine/lock"

// Locks is the stacks' state locks, Leases beside their inventories.
func (e *Engine) Locks() lock.Store {
	return lock.Store{Client: e.Clients.Typed, Namespace: e.Inventory.Namespace}
}
