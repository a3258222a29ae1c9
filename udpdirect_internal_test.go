package tickwire

import (
	"errors"
	"syscall"
	"testing"
)

// TestUDPTable: sockets registered on ports across page boundaries are
// found on exactly their ports; a taken port is refused; remove takes a
// socket away only from the port it holds, and the count of open sockets
// follows.
func TestUDPTable(t *testing.T) {
	var tab udpTable
	ports := []uint16{1, 255, 256, 4791, 65280, 65535}
	conns := make(map[uint16]*UDPConn)
	for _, p := range ports {
		conns[p] = new(UDPConn)
		if err := tab.add(p, conns[p]); err != nil || conns[p].port != p {
			t.Fatalf("add(%d): %v, port %d", p, err, conns[p].port)
		}
	}
	if n := tab.open.Load(); n != int32(len(ports)) {
		t.Errorf("%d open after %d adds", n, len(ports))
	}
	for p := range 1 << 16 {
		want := conns[uint16(p)]
		if got := tab.lookup(uint16(p)); got != want {
			t.Fatalf("lookup(%d) = %p, want %p", p, got, want)
		}
	}
	if err := tab.add(4791, new(UDPConn)); !errors.Is(err, syscall.EADDRINUSE) || tab.lookup(4791) != conns[4791] {
		t.Errorf("add on a taken port: %v", err)
	}
	tab.remove(256, conns[255]) // not the socket on 256: no change
	if tab.lookup(256) != conns[256] || tab.open.Load() != int32(len(ports)) {
		t.Error("remove of another port's socket changed the table")
	}
	tab.remove(256, conns[256])
	tab.remove(256, conns[256]) // twice: counted once
	tab.remove(1000, conns[1])  // a page never made
	if tab.lookup(256) != nil || tab.lookup(255) != conns[255] || tab.open.Load() != int32(len(ports)-1) {
		t.Errorf("after removing 256: lookup(256) %p, open %d", tab.lookup(256), tab.open.Load())
	}
	if n := testing.AllocsPerRun(100, func() { tab.lookup(4791) }); n != 0 {
		t.Errorf("lookup allocates %v", n)
	}
}

// TestUDPTableEphemeral: port 0 takes a free port of the ephemeral range,
// each once, until none is left, then fails with EAGAIN.
func TestUDPTableEphemeral(t *testing.T) {
	var tab udpTable
	free := map[uint16]bool{}
	for p := firstEphemeralPort; p < 1<<16; p += 491 { // a few, across pages
		free[uint16(p)] = true
	}
	taken := new(UDPConn) // one socket on all the other ports
	for p := firstEphemeralPort; p < 1<<16; p++ {
		if !free[uint16(p)] {
			if err := tab.add(uint16(p), taken); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range len(free) {
		c := new(UDPConn)
		if err := tab.add(0, c); err != nil {
			t.Fatalf("with %d ports free: %v", len(free), err)
		}
		if !free[c.port] {
			t.Fatalf("ephemeral port %d: not a free one", c.port)
		}
		delete(free, c.port)
	}
	if err := tab.add(0, new(UDPConn)); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("with every ephemeral port taken: %v, want EAGAIN", err)
	}
	if err := tab.add(80, new(UDPConn)); err != nil {
		t.Fatalf("an explicit port below the range: %v", err)
	}
}
