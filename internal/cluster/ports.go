package cluster

import (
	"fmt"
	"net"
	"strconv"
)

// checkPortFree reports a clear error when a port the caller asked for
// explicitly is already taken.
func checkPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is already in use (%v): stop whatever listens there (see `ss -ltnp 'sport = :%d'`) or choose another port", port, err, port)
	}
	return l.Close()
}
