package realnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
)

// Each node has a bridge of its own, created before kubelet starts, with the
// node's IP on it: kubelet refuses a loopback node IP and wants one that is
// on an interface, the API server reaches kubelet there (logs, exec), and
// the CNI bridge plugin attaches the node's pods to the same bridge.
// Nothing routes between nodes: pods on different nodes cannot talk to each
// other, and no test needs them to.

// subnetBase is the /16 the nodes' pod subnets come from, one /24 per slot.
const subnetBase = "10.234"

func bridgeName(slot int) string { return fmt.Sprintf("gpuslice%d", slot) }

// nodeIP is the bridge's address: the node's InternalIP and pod gateway.
func nodeIP(slot int) string { return fmt.Sprintf("%s.%d.1", subnetBase, slot) }

func podSubnet(slot int) string { return fmt.Sprintf("%s.%d.0/24", subnetBase, slot) }

func createBridge(slot int) error {
	name := bridgeName(slot)
	_ = deleteLink(name) // a leftover of a node killed before its clean-up
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("create bridge %s: %w (real nodes need root)", name, err)
	}
	addr, err := netlink.ParseAddr(nodeIP(slot) + "/24")
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(br, addr); err != nil {
		_ = deleteLink(name)
		return fmt.Errorf("address bridge %s: %w", name, err)
	}
	if err := pinMAC(br); err != nil {
		_ = deleteLink(name)
		return err
	}
	if err := netlink.LinkSetUp(br); err != nil {
		_ = deleteLink(name)
		return fmt.Errorf("bring up bridge %s: %w", name, err)
	}
	return nil
}

// pinMAC sets the bridge's MAC address to the one it has. A bridge whose
// address was never set takes the lowest of its ports' and changes as pods
// come and go; the pods' ARP entries for their gateway then point at an
// address no port has, and their connections through the node (the API
// server's, forward.go) stall until the entry expires, long enough for a
// client's HTTP/2 health check to drop the connection. The CNI bridge
// plugin pins it only when it adds the gateway's address itself, and here
// the node adds it first.
func pinMAC(br *netlink.Bridge) error {
	link, err := netlink.LinkByName(br.Name)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", br.Name, err)
	}
	if err := netlink.LinkSetHardwareAddr(link, link.Attrs().HardwareAddr); err != nil {
		return fmt.Errorf("set the MAC address of bridge %s: %w", br.Name, err)
	}
	return nil
}

// deleteLink removes a link; one that is gone already is not an error.
func deleteLink(name string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return err
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}

// writeCNIConfig writes the node's network: the bridge plugin on the node's
// bridge with host-local addresses from its subnet, kept in the node's
// directory. No masquerading, so no iptables is needed.
func writeCNIConfig(confDir, ipamDir string, slot int) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "gpuslice-node",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridgeName(slot),
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": ipamDir,
					"ranges":  [][]map[string]string{{{"subnet": podSubnet(slot), "gateway": nodeIP(slot)}}},
					// A default route through the node: pods reach the API
					// server's Service address (forward.go), as in-cluster
					// clients do, and nothing beyond the node.
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "loopback"},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(confDir, "10-gpuslice.conflist"), data, 0o644)
}
