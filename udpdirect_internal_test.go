package tickwire

import "testing"

// TestUDPTable: sockets registered on ports across page boundaries are
// found on exactly their ports; remove takes a socket away only from the
// port it holds, and the count of open sockets follows.
func TestUDPTable(t *testing.T) {
	var tab udpTable
	ports := []uint16{0, 1, 255, 256, 4791, 65280, 65535}
	conns := make(map[uint16]*UDPConn)
	for _, p := range ports {
		conns[p] = new(UDPConn)
		tab.add(p, conns[p])
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
	// A socket opened again on a port replaces the old one, counted once.
	again := new(UDPConn)
	tab.add(4791, again)
	if tab.lookup(4791) != again || tab.open.Load() != int32(len(ports)-1) {
		t.Error("re-adding a port")
	}
	if n := testing.AllocsPerRun(100, func() { tab.lookup(4791) }); n != 0 {
		t.Errorf("lookup allocates %v", n)
	}
}
