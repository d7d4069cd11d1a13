package cluster

import (
	"fmt"
	"net"
	"strconv"
)

// freePorts reserves n distinct free TCP ports on 127.0.0.1. The listeners
// are closed before the components bind, so another program could take a
// port in between; a component that then fails to bind is reported with its
// log by Start.
func freePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// checkPortFree reports a clear error when a port the caller asked for
// explicitly is already taken.
func checkPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is already in use (%v): stop whatever listens there (see `ss -ltnp 'sport = :%d'`) or choose another port", port, err, port)
	}
	return l.Close()
}
