package tickwire_test

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// backlogLink is link/pipe reporting the transmit backlog the test sets,
// and keeping the Stack's request to be told when it is low for the test to
// answer.
type backlogLink struct {
	*pipe.Endpoint
	backlog atomic.Int64

	mu sync.Mutex
	// +checklocks:mu
	notifyN int
	// +checklocks:mu
	notifyFn func()
}

// TxBacklog implements link.TxBacklogger.TxBacklog.
func (l *backlogLink) TxBacklog() int { return int(l.backlog.Load()) }

// NotifyTxBacklog implements link.TxBacklogger.NotifyTxBacklog: the
// request waits for notify.
func (l *backlogLink) NotifyTxBacklog(n int, fn func()) bool {
	if l.TxBacklog() <= n {
		return false
	}
	l.mu.Lock()
	l.notifyN, l.notifyFn = n, fn
	l.mu.Unlock()
	return true
}

// request returns the waiting request's bound and whether one waits.
func (l *backlogLink) request() (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.notifyN, l.notifyFn != nil
}

// notify sets the backlog to n and answers the waiting request.
func (l *backlogLink) notify(n int) {
	l.backlog.Store(int64(n))
	l.mu.Lock()
	fn := l.notifyFn
	l.notifyFn = nil
	l.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// newBacklogPair joins two stacks over link/pipe with queueLen frames a
// direction (0: the default), A's end reporting the backlog that the
// returned link is given.
func newBacklogPair(t *testing.T, queueLen int) (a, b *tickwire.Stack, la *backlogLink) {
	t.Helper()
	pa, pb := pipe.New(pipe.Options{QueueLen: queueLen})
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
	a, b, la := newBacklogPair(t, 0)
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
	a, b, la := newBacklogPair(t, 0)
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

// TestHeldWriteWokenByLink: a Write held on the link's backlog goes on when
// the link reports it drained, not on a timer (the test's hold is an hour
// long). The bounds follow the link's queue: a queue of 64 frames holds
// Writes above 32 and asks to be told at 16.
func TestHeldWriteWokenByLink(t *testing.T) {
	defer tickwire.SetTxBacklogWait(time.Hour)()
	a, b, la := newBacklogPair(t, 64)
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

	la.backlog.Store(32)
	if _, err := c.Write([]byte("free")); err != nil {
		t.Fatal(err)
	}
	if n := a.Stats().TCPWritesHeld; n != 0 {
		t.Fatalf("TCPWritesHeld = %d after a Write over a backlog of half the queue, want 0", n)
	}
	la.backlog.Store(33)
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte("held"))
		wrote <- err
	}()
	for {
		if _, ok := la.request(); ok && a.Stats().TCPWritesHeld == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if n, _ := la.request(); n != 16 {
		t.Errorf("the Stack asked to be told at a backlog of %d, want 16 (a quarter of the queue)", n)
	}
	select {
	case err := <-wrote:
		t.Fatalf("the held Write returned (%v) before the link drained", err)
	default:
	}
	la.notify(16)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != "freeheld" {
		t.Errorf("read %q, %v; want \"freeheld\"", got, err)
	}
}

// TestHeldWriteDeadline: a Write held on the link's backlog ends at its
// deadline, even with no end to the hold in sight, having written nothing.
func TestHeldWriteDeadline(t *testing.T) {
	defer tickwire.SetTxBacklogWait(time.Hour)()
	a, b, la := newBacklogPair(t, 0)
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
	la.backlog.Store(1 << 20)
	c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
	if n, err := c.Write([]byte("held")); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("held Write past its deadline: %d, %v; want 0, os.ErrDeadlineExceeded", n, err)
	}
}
