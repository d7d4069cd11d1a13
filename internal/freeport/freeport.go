// Package freeport finds loopback TCP ports for processes that bind them
// themselves (etcd, the API server, source-controller, a metrics server).
//
// The usual way, a listener on port 0 closed before the process starts,
// hands out a port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), which every outgoing connection draws
// from too: once closed, the port can be taken by any connection on the
// machine before the process binds it, and the process exits with
// "address already in use". Ports below that range are taken only by an
// explicit bind, so this package draws from there.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Low is the first port drawn: above the ports services are configured on.
const Low = 20000

// Ports returns n distinct loopback ports no one listens on now, drawn at
// random below the ephemeral range.
func Ports(n int) ([]int, error) {
	high := ephemeralLow()
	ports := make([]int, 0, n)
	taken := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("no %d free loopback ports between %d and %d: see what listens there with `ss -ltn`", n, Low, high)
		}
		port := Low + rand.IntN(high-Low)
		if taken[port] || !free(port) {
			continue
		}
		taken[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// Addr is one such port as a loopback address, "127.0.0.1:port".
func Addr() (string, error) {
	ports, err := Ports(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), nil
}

func free(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	return ln.Close() == nil
}

// ephemeralLow is the first port of the kernel's ephemeral range: 32768,
// Linux's default, where it cannot be read or leaves too little room.
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return linuxDefault
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < Low+1000 {
		return linuxDefault
	}
	return low
}
