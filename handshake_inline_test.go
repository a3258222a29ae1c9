package tickwire_test

import (
	"context"
	"io"
	"testing"

	"github.com/tickwire/tickwire"
)

// TestConnectProcessedInline: over link/pipe in stock mode, the segments a
// goroutine waits for in a connection's life (the SYN at the listener, the
// SYN-ACK at the dialer, whose SYN leaves once Connect has returned, the
// handshake's ACK at the listener, the server's FIN at the client) are
// processed by the delivering goroutine, not handed to netstack's
// processors: two of them on each side per connection.
func TestConnectProcessedInline(t *testing.T) {
	if suiteLatency {
		t.Skip("latency mode processes on its own terms (syncer.go)")
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
	const cycles = 100
	var b [1]byte
	for range cycles {
		c, err := p.a.DialTCP(context.Background(), addrPort(addrB, echoPort))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(b[:]); err != io.EOF {
			t.Fatalf("read after the server's close: %v, want EOF", err)
		}
		c.Close()
	}
	client, clientKicked := tickwire.DeferredProcessed(p.a)
	server, serverKicked := tickwire.DeferredProcessed(p.b)
	t.Logf("processed inline: client %d (%d left to processors), server %d (%d); %d connections",
		client, clientKicked, server, serverKicked, cycles)
	// Two each per connection when nothing else runs (none without inline
	// processing); a segment that arrives while its stack is sending on
	// another goroutine (the server's Close) goes to a processor, so a
	// quarter is enough.
	if client < cycles/2 || server < cycles/2 {
		t.Errorf("processed inline: client %d, server %d; want at least %d each (two per connection)", client, server, cycles/2)
	}
}
