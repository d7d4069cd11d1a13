package realnode

import (
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/gpuslice/gpuslice/internal/testenv"
)

// A node's bridge keeps its MAC address while pods' interfaces come and
// go: a pod's gateway entry in its ARP cache stays right, so its
// connections through the node do not stall. Without the pin, the bridge
// takes the lowest address of its ports.
func TestBridgeKeepsItsMAC(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "creating a bridge needs root")
	}
	errs := make(chan error, 1)
	go func() {
		// The thread stays locked: it ends with this goroutine, and the
		// network namespace with it, so nothing is left on the host even
		// if the test is killed.
		runtime.LockOSThread()
		if _, err := netns.New(); err != nil {
			errs <- err
			return
		}
		errs <- bridgeKeepsMAC(t)
	}()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

func bridgeKeepsMAC(t *testing.T) error {
	const slot = 1
	if err := createBridge(slot); err != nil {
		return err
	}
	br, err := netlink.LinkByName(bridgeName(slot))
	if err != nil {
		return err
	}
	before := br.Attrs().HardwareAddr.String()
	low, _ := net.ParseMAC("02:00:00:00:00:01")
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "podhost0", HardwareAddr: low, MasterIndex: br.Attrs().Index}, PeerName: "pod0"}
	if err := netlink.LinkAdd(veth); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		return err
	}
	mac := func() string {
		l, err := netlink.LinkByName(bridgeName(slot))
		if err != nil {
			t.Error(err)
			return ""
		}
		return l.Attrs().HardwareAddr.String()
	}
	if got := mac(); got != before {
		t.Errorf("a pod's interface (%s) joined the bridge and its MAC changed from %s to %s", low, before, got)
	}
	if err := netlink.LinkDel(veth); err != nil {
		return err
	}
	if got := mac(); got != before {
		t.Errorf("a pod's interface left the bridge and its MAC changed from %s to %s", before, got)
	}
	return nil
}
