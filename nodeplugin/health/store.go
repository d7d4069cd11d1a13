package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/gpuslice/gpuslice/nodeplugin/internal/atomicfile"
)

// Faults outlive the plugin: the driver delivers an XID once, so a plugin
// restarted by an upgrade or a crash that forgot it would put a failing GPU
// back into service. The watcher rewrites its faults to Config.Store on each
// change and reads them back at start; the recovery time runs on from the
// last fault, not from the restart.

// StoreVersion is the format of the faults file; a file of another version
// is not read.
const StoreVersion = 1

// StoreFile is the faults file's name in the plugin's state directory.
const StoreFile = "health.json"

type storedFaults struct {
	Version int              `json:"version"`
	Faults  map[string]Fault `json:"faults"` // by GPU UUID
}

// load reads the faults kept by an earlier run, of the GPUs still watched.
func (w *Watcher) load() error {
	data, err := os.ReadFile(w.cfg.Store)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s storedFaults
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	if s.Version != StoreVersion {
		return fmt.Errorf("format version %d, this plugin reads %d", s.Version, StoreVersion)
	}
	for u, f := range s.Faults {
		if g, ok := w.byUUID[u]; ok {
			w.faults[u] = f
			w.cfg.Logger.Info("GPU unhealthy since before this start", "index", g.Index, "uuid", u, "reason", f.Reason, "lastFault", f.Last)
		}
	}
	return nil
}

// save rewrites the faults file with the faults now. A failed write is
// logged: health still works in memory, and only a restart would forget.
func (w *Watcher) save() {
	if w.cfg.Store == "" {
		return
	}
	w.saveMu.Lock()
	defer w.saveMu.Unlock()
	data, err := json.Marshal(storedFaults{Version: StoreVersion, Faults: w.Unhealthy()})
	if err == nil {
		// a restart after a power loss may read the previous faults: the
		// readings catch up within one poll
		err = atomicfile.WriteNoSync(w.cfg.Store, data, 0o644)
	}
	if err != nil {
		w.cfg.Logger.Error(err, "GPU health: keep the faults for the next start; a restart now would forget them", "file", w.cfg.Store)
	}
}
