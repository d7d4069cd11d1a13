package simulate

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// The faults a simulated GPU can be made to report, as the driver reports
// them: critical XIDs and double-bit ECC errors through NVML event sets
// (which go-nvml's mock lacks), and a GPU that fell off the bus answering
// every reading with ERROR_GPU_IS_LOST.

// supportedEvents are the event types a simulated GPU delivers, as a
// datacenter GPU with ECC on does.
const supportedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError

type nodeFaults struct {
	devices []*server.Device
	lost    []*atomic.Bool
	dbe     []*atomic.Uint64 // volatile uncorrected ECC errors

	mu   sync.Mutex
	sets []*eventSet
}

// faultsOf maps a simulated node's server to its faults; NewNode adds it.
var faultsOf sync.Map // *server.Server -> *nodeFaults

// attachFaults gives the node's GPUs event sets and a lost switch.
func attachFaults(s *server.Server, devices []*server.Device) {
	f := &nodeFaults{devices: devices}
	for _, d := range devices {
		lost, dbe := &atomic.Bool{}, &atomic.Uint64{}
		f.lost, f.dbe = append(f.lost, lost), append(f.dbe, dbe)
		d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
			switch {
			case lost.Load():
				return 0, nvml.ERROR_GPU_IS_LOST
			case t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && c == nvml.VOLATILE_ECC:
				return dbe.Load(), nvml.SUCCESS
			}
			return 0, nvml.SUCCESS
		}
		memory := d.GetMemoryInfoFunc
		d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			if lost.Load() {
				return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
			}
			return memory()
		}
		d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			if lost.Load() {
				return 0, nvml.ERROR_GPU_IS_LOST
			}
			return supportedEvents, nvml.SUCCESS
		}
		d.RegisterEventsFunc = func(types uint64, set nvml.EventSet) nvml.Return {
			es, ok := set.(*eventSet)
			if !ok {
				return nvml.ERROR_INVALID_ARGUMENT
			}
			if types&^supportedEvents != 0 {
				return nvml.ERROR_NOT_SUPPORTED
			}
			es.register(d, types)
			return nvml.SUCCESS
		}
	}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		es := &eventSet{events: make(chan nvml.EventData, 64), registered: map[*server.Device]uint64{}}
		es.FreeFunc = func() nvml.Return { return nvml.SUCCESS }
		f.mu.Lock()
		f.sets = append(f.sets, es)
		f.mu.Unlock()
		return es, nvml.SUCCESS
	}
	faultsOf.Store(s, f)
}

type eventSet struct {
	mock.EventSet
	events chan nvml.EventData

	mu         sync.Mutex
	registered map[*server.Device]uint64
}

func (es *eventSet) register(d *server.Device, types uint64) {
	es.mu.Lock()
	defer es.mu.Unlock()
	es.registered[d] |= types
}

func (es *eventSet) wants(d *server.Device, t uint64) bool {
	es.mu.Lock()
	defer es.mu.Unlock()
	return es.registered[d]&t != 0
}

// Wait is nvmlEventSetWait: the next event, or ERROR_TIMEOUT after
// timeout milliseconds.
func (es *eventSet) Wait(timeout uint32) (nvml.EventData, nvml.Return) {
	t := time.NewTimer(time.Duration(timeout) * time.Millisecond)
	defer t.Stop()
	select {
	case e := <-es.events:
		return e, nvml.SUCCESS
	case <-t.C:
		return nvml.EventData{}, nvml.ERROR_TIMEOUT
	}
}

func faults(s *server.Server, gpu int) (*nodeFaults, error) {
	v, ok := faultsOf.Load(s)
	if !ok {
		return nil, fmt.Errorf("NVML server %p is not a simulated node: build it with simulate.NewNode", s)
	}
	f := v.(*nodeFaults)
	if gpu < 0 || gpu >= len(f.devices) {
		return nil, fmt.Errorf("simulated node has GPUs 0 to %d, not GPU %d", len(f.devices)-1, gpu)
	}
	return f, nil
}

// send delivers an event of type t from GPU gpu to every event set that
// registered for it, and says how many did (0: nobody listens yet).
func (f *nodeFaults) send(gpu int, t, data uint64) int {
	d := f.devices[gpu]
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, es := range f.sets {
		if es.wants(d, t) {
			es.events <- nvml.EventData{Device: d, EventType: t, EventData: data}
			n++
		}
	}
	return n
}

// InjectXID makes simulated GPU gpu report a critical XID error, as the
// driver does in the kernel log and to NVML event sets. It returns how
// many event sets it reached.
func InjectXID(s *server.Server, gpu int, xid uint64) (int, error) {
	f, err := faults(s, gpu)
	if err != nil {
		return 0, err
	}
	return f.send(gpu, nvml.EventTypeXidCriticalError, xid), nil
}

// InjectDoubleBitECC makes simulated GPU gpu report an uncorrectable
// (double-bit) ECC error: it counts in the GPU's volatile ECC counter and
// goes to the event sets. It returns how many event sets it reached.
func InjectDoubleBitECC(s *server.Server, gpu int) (int, error) {
	f, err := faults(s, gpu)
	if err != nil {
		return 0, err
	}
	f.dbe[gpu].Add(1)
	return f.send(gpu, nvml.EventTypeDoubleBitEccError, 0), nil
}

// SetLost makes simulated GPU gpu fall off the bus (lost) or come back:
// while lost, reading its memory or events answers ERROR_GPU_IS_LOST.
func SetLost(s *server.Server, gpu int, lost bool) error {
	f, err := faults(s, gpu)
	if err != nil {
		return err
	}
	f.lost[gpu].Store(lost)
	return nil
}
