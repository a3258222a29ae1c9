package tickwire_test

import (
	"context"
	"io"
	"testing"

	"github.com/tickwire/tickwire"
)

// connectAllocs bounds the heap allocations of opening and closing one
// connection, both ends together, as the DialTCP doc states it.
const connectAllocs = 165

// TestConnectAllocs: a dial, its accept, the server's close, the client's
// EOF and close (tcp_connect's cycle) allocate at most connectAllocs
// objects, both ends together (netstack's endpoints make most of them).
func TestConnectAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates more (201 per connection)")
	}
	p := newPair(t, func(c *tickwire.Config) { c.MaxConnections = 1024 })
	ln, err := p.b.ListenTCP(echoPort)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	var b [1]byte
	cycle := func() {
		c, err := p.a.DialTCP(context.Background(), addrPort(addrB, echoPort))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(b[:]); err != io.EOF {
			t.Fatalf("read after the server's close: %v, want EOF", err)
		}
		c.Close()
	}
	n := testing.AllocsPerRun(500, cycle)
	t.Logf("%.1f allocations per connection, both ends", n)
	if n > connectAllocs {
		t.Errorf("%.1f allocations per connection, both ends; want at most %d", n, connectAllocs)
	}
}
