package tickwire_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// stockPair is two stacks over a pipe in stock mode, whatever the suite's
// mode (the hand-off is stock mode's), with a connection between them:
// c dialed from A, s accepted on B.
func stockPair(t *testing.T) (c, s net.Conn) {
	t.Helper()
	pa, pb := pipe.New(pipe.Options{})
	a, err := tickwire.New(tickwire.Config{Link: pa, MAC: pa.MAC(), Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := tickwire.New(tickwire.Config{Link: pb, MAC: pb.MAC(), Addr: addrB})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ln, err := b.ListenTCP(echoPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c, err = a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, echoPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}

// readWhenWaiting starts a Read of len(want) bytes on c, has write send
// them once that Read waits in hand-off, and checks what it read.
func readWhenWaiting(t *testing.T, c net.Conn, want []byte, write func()) {
	t.Helper()
	got := make([]byte, len(want))
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(c, got)
		done <- err
	}()
	if !waitFor(10*time.Second, func() bool { return tickwire.ReadWaiting(c) }) {
		t.Fatal("the Read never waited in hand-off")
	}
	write()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// TestReadHandoff: data for a Read that waits is handed to it (and read
// byte-exact), and the ACK it leaves owed reaches the writer although the
// reader sends nothing.
func TestReadHandoff(t *testing.T) {
	c, s := stockPair(t)
	msg := []byte("the reader processes this segment itself")
	for i := range 20 {
		msg[0] = byte('a' + i)
		before := s.(*tickwire.TCPConn).Info().SegmentsReceived
		readWhenWaiting(t, c, msg, func() {
			if _, err := s.Write(msg); err != nil {
				t.Fatal(err)
			}
		})
		// The reader wrote nothing: the timer sends the owed ACK.
		if !waitFor(10*time.Second, func() bool { return s.(*tickwire.TCPConn).Info().SegmentsReceived > before }) {
			t.Fatalf("round %d: the writer never saw an ACK", i)
		}
	}
	// The owed ACKs left within the timer's millisecond, long before the
	// writer's retransmission timeout (200 ms at least), whose
	// retransmission would have drawn an ACK too.
	if info := s.(*tickwire.TCPConn).Info(); info.Retransmits != 0 || info.Timeouts != 0 {
		t.Errorf("the writer retransmitted (%d segments, %d timeouts): ACKs came late", info.Retransmits, info.Timeouts)
	}
	// A segment finds the endpoint busy only if a netstack goroutine holds
	// it at that moment; twenty rounds cannot all be that unlucky.
	if tickwire.HandedOff(c) == 0 {
		t.Error("no segment was handed to the waiting Read")
	}
}

// TestReadHandoffDeadlines: Reads that give up on a short deadline, racing
// with the data that would have been handed to them, leave no segment
// behind: every byte of a stream written in small pieces arrives, in order.
func TestReadHandoffDeadlines(t *testing.T) {
	c, s := stockPair(t)
	const total = 64 << 10
	go func() {
		buf := make([]byte, 97)
		for n := 0; n < total; n += len(buf) {
			for i := range buf {
				buf[i] = byte(n + i)
			}
			if _, err := s.Write(buf[:min(len(buf), total-n)]); err != nil {
				return
			}
			if n%(8*len(buf)) == 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	buf := make([]byte, 256)
	stall := time.Now().Add(30 * time.Second)
	for n, i := 0, 0; n < total; i++ {
		// Mostly deadlines shorter than the writer's pauses; every fourth
		// Read waits long enough to make progress whatever the load.
		wait := 100 * time.Microsecond
		if i%4 == 3 {
			wait = time.Second
		}
		c.SetReadDeadline(time.Now().Add(wait))
		m, err := c.Read(buf)
		for i := range m {
			if buf[i] != byte(n+i) {
				t.Fatalf("byte %d is %d, want %d", n+i, buf[i], byte(n+i))
			}
		}
		n += m
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			if time.Now().After(stall) {
				t.Fatalf("stalled after %d of %d bytes", n, total)
			}
		default:
			t.Fatal(err)
		}
	}
}
