package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsAreDistinctFreeAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := Ports(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < Low || p >= ephemeralLow() {
			t.Errorf("port %d outside [%d, %d)", p, Low, ephemeralLow())
		}
		if seen[p] {
			t.Errorf("port %d drawn twice", p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		ln.Close()
	}
}

func TestAPortInUseIsNotFree(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if port := ln.Addr().(*net.TCPAddr).Port; free(port) {
		t.Fatalf("port %d reported free while a listener holds it", port)
	}
}
