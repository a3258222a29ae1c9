package tickwire_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// backlogLink is link/pipe reporting the transmit backlog the test sets.
type backlogLink struct {
	*pipe.Endpoint
	backlog atomic.Int64
}

// TxBacklog implements link.TxBacklogger.TxBacklog.
func (l *backlogLink) TxBacklog() int { return int(l.backlog.Load()) }

// newBacklogPair joins two stacks over link/pipe, A's end reporting the
// backlog that the returned link is given.
func newBacklogPair(t *testing.T) (a, b *tickwire.Stack, la *backlogLink) {
	t.Helper()
	pa, pb := pipe.New(pipe.Options{})
	la = &backlogLink{Endpoint: pa}
	var err error
	if a, err = newStack(tickwire.Config{Link: la, MAC: pa.MAC(), Addr: addrA}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if b, err = newStack(tickwire.Config{Link: pb, MAC: pb.MAC(), Addr: addrB}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b, la
}

// TestWriteWaitsForLinkBacklog: a Write over a link whose backlog is over
// the bound is held (and counted), but only for a while: it completes
// even though the backlog never shrinks, and the bytes arrive. Below the
// bound a Write is not held.
func TestWriteWaitsForLinkBacklog(t *testing.T) {
	a, b, la := newBacklogPair(t)
	ln, err := b.ListenTCP(echoPort)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := a.DialTCP(ctxTimeout(t, 10*time.Second), addrPort(addrB, echoPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	la.backlog.Store(1 << 20)
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	if n := a.Stats().TCPWritesHeld; n != 1 {
		t.Errorf("TCPWritesHeld = %d after a Write over a long backlog, want 1", n)
	}
	la.backlog.Store(0)
	if _, err := c.Write([]byte("free")); err != nil {
		t.Fatal(err)
	}
	if n := a.Stats().TCPWritesHeld; n != 1 {
		t.Errorf("TCPWritesHeld = %d after a Write over an empty backlog, want still 1", n)
	}
	got := make([]byte, 8)
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != "heldfree" {
		t.Errorf("read %q, %v; want \"heldfree\"", got, err)
	}
}

// TestHandlerWriteNotHeld: a Write from a connection's own handler must not
// wait (the handler may run on the goroutine delivering the backlog), so a
// long backlog does not hold it.
func TestHandlerWriteNotHeld(t *testing.T) {
	a, b, la := newBacklogPair(t)
	ln, err := a.ServeTCP(echoPort, func(c *tickwire.TCPConn, data []byte, err error) {
		if err == nil {
			c.Write(data)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	la.backlog.Store(1 << 20)
	c, err := b.DialTCP(context.Background(), addrPort(addrA, echoPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo %q, %v; want \"ping\"", got, err)
	}
	if n := a.Stats().TCPWritesHeld; n != 0 {
		t.Errorf("TCPWritesHeld = %d after the handler's Write, want 0", n)
	}
}
