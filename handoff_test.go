package tickwire_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/link/pipe"
)

// stockPair is two stacks over a pipe in stock mode, whatever the suite's
// mode (the hand-off is stock mode's), with a connection between them:
// c dialed from A, s accepted on B.
func stockPair(t *testing.T) (c, s net.Conn) {
	t.Helper()
	_, c, s = stockPairStacks(t)
	return c, s
}

// stockPairStacks is stockPair that also returns the stacks and the pipe.
func stockPairStacks(t *testing.T) (p *pair, c, s net.Conn) {
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
	return &pair{a: a, b: b, pa: pa, pb: pb}, c, s
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
	p, c, s := stockPairStacks(t)
	if a, b := tickwire.HeldFlows(p.a), tickwire.HeldFlows(p.b); a != 1 || b != 1 {
		t.Errorf("held flows: client %d, server %d; want 1 each", a, b)
	}
	msg := []byte("the reader processes this segment itself")
	const rounds = 20
	timely := 0
	for i := range rounds {
		msg[0] = byte('a' + i)
		before := s.(*tickwire.TCPConn).Info()
		readWhenWaiting(t, c, msg, func() {
			if _, err := s.Write(msg); err != nil {
				t.Fatal(err)
			}
		})
		// The reader wrote nothing: the timer sends the owed ACK.
		if !waitFor(10*time.Second, func() bool { return s.(*tickwire.TCPConn).Info().SegmentsReceived > before.SegmentsReceived }) {
			t.Fatalf("round %d: the writer never saw an ACK", i)
		}
		// A retransmission would have drawn an ACK too: the round shows
		// the timer's ACK only if the writer's retransmission timer (200
		// ms at least) had not expired by then.
		if s.(*tickwire.TCPConn).Info().Timeouts == before.Timeouts {
			timely++
		}
	}
	// The owed ACK leaves within the timer's millisecond. A process
	// descheduled for 200 ms by a loaded machine may let the writer's
	// retransmission timer fire first in a round, so the test asks half
	// of the rounds, not all: with no timer ACK every round would need a
	// retransmission.
	if info := s.(*tickwire.TCPConn).Info(); timely*2 < rounds {
		t.Errorf("the writer's ACK came before its retransmission timeout in %d of %d rounds, want at least half (%d segments retransmitted, %d timeouts)",
			timely, rounds, info.Retransmits, info.Timeouts)
	} else if timely < rounds {
		t.Logf("the writer retransmitted in %d of %d rounds", rounds-timely, rounds)
	}
	// A segment finds the endpoint busy only if a netstack goroutine holds
	// it at that moment; twenty rounds cannot all be that unlucky.
	if tickwire.HandedOff(c) == 0 {
		t.Error("no segment was handed to the waiting Read")
	}
	// Handed over past netstack's network layer (tcpdirect.go).
	if tickwire.TCPDirect(p.a) == 0 {
		t.Error("no segment skipped netstack's network layer")
	}
	c.Close()
	if n := tickwire.HeldFlows(p.a); n != 0 {
		t.Errorf("client holds %d flows after Close, want 0", n)
	}
}

// TestReadHandoffBadChecksum: a data segment with a wrong checksum handed
// to a waiting Read is dropped and counted by TCP, and the Read goes on to
// read the real data.
func TestReadHandoffBadChecksum(t *testing.T) {
	p, c, s := stockPairStacks(t)
	from := s.LocalAddr().(*net.TCPAddr).AddrPort()
	to := c.LocalAddr().(*net.TCPAddr).AddrPort()
	seg := make([]byte, header.TCPMinimumSize+10)
	tcp := header.TCP(seg)
	tcp.Encode(&header.TCPFields{SrcPort: from.Port(), DstPort: to.Port(), SeqNum: 1, AckNum: 1,
		DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagAck | header.TCPFlagPsh, WindowSize: 1000})
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom4(from.Addr().As4()), tcpip.AddrFrom4(to.Addr().As4()), uint16(len(seg)))
	tcp.SetChecksum(^checksum.Checksum(seg, xsum) ^ 0x0101)
	frame := ethernet(p.pa.MAC(), p.pb.MAC(), uint16(header.IPv4ProtocolNumber), ipv4Packet(from.Addr(), to.Addr(), uint8(header.TCPProtocolNumber), seg))
	msg := []byte("after the bad one")
	readWhenWaiting(t, c, msg, func() {
		if err := p.pb.Send(frame); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
	})
	if st := p.a.Stats(); st.DropTCPChecksum != 1 {
		t.Errorf("bad checksum: %d checksum drops, want 1", st.DropTCPChecksum)
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

// seededPattern returns n bytes that, unlike pattern's, repeat only every
// 64 KiB and differ by seed, so that a stream's lost, repeated or
// reordered segments show.
func seededPattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed ^ byte(i) ^ byte(i>>8)*7
	}
	return b
}

// TestWriteHandoff: streams larger than the send buffer, both ways at
// once, arrive byte-exact, and the ACKs that free a waiting Write's
// send-buffer space are handed to that Write instead of a processor.
func TestWriteHandoff(t *testing.T) {
	_, c, s := stockPairStacks(t)
	// Fixed 32 KiB send buffers: grown by auto-tuning (Config.SendBufferMax),
	// a Write would rarely find its buffer full, and the hand-off to a
	// waiting Write is what this tests.
	for _, conn := range []net.Conn{c, s} {
		if err := conn.(*tickwire.TCPConn).SetWriteBuffer(32 << 10); err != nil {
			t.Fatal(err)
		}
	}
	const size = 4 << 20 // 128 windows of the 32 KiB buffers
	type result struct {
		got []byte
		err error
	}
	stream := func(w, r net.Conn, seed byte) (<-chan error, <-chan result) {
		werr, rres := make(chan error, 1), make(chan result, 1)
		go func() {
			data := seededPattern(seed, size)
			for len(data) > 0 {
				n := min(len(data), 64<<10)
				if _, err := w.Write(data[:n]); err != nil {
					werr <- err
					return
				}
				data = data[n:]
			}
			werr <- nil
		}()
		go func() {
			got := make([]byte, size)
			_, err := io.ReadFull(r, got)
			rres <- result{got, err}
		}()
		return werr, rres
	}
	cw, sr := stream(c, s, 1)
	sw, cr := stream(s, c, 2)
	for _, e := range []<-chan error{cw, sw} {
		if err := <-e; err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range []<-chan result{sr, cr} {
		res := <-r
		if res.err != nil {
			t.Fatal(res.err)
		}
		if want := seededPattern(byte(i+1), size); !bytes.Equal(res.got, want) {
			t.Fatalf("stream %d: bytes differ from what was written", i)
		}
	}
	// Each side's Write waited for room about once per window turn; a
	// segment misses it only when it finds the endpoint busy or the Write
	// between waits, which cannot happen to all of them.
	if tickwire.WriteHandedOff(c) == 0 || tickwire.WriteHandedOff(s) == 0 {
		t.Errorf("segments handed to waiting Writes: client %d, server %d; want some on each",
			tickwire.WriteHandedOff(c), tickwire.WriteHandedOff(s))
	}
}

// TestReadHandoffOneACK: a segment handed to a waiting Read that then
// reads it all is answered by one ACK, carrying both the acknowledgement
// and the window the read reopened, not by one for each.
func TestReadHandoffOneACK(t *testing.T) {
	c, s := stockPair(t)
	// Open the sender's congestion window, so that each write below
	// leaves as one segment (GSO on link/pipe).
	warm := seededPattern(3, 1<<20)
	readWhenWaiting(t, c, warm, func() {
		go s.Write(warm)
	})
	const rounds = 20
	msg := seededPattern(4, 16<<10) // half the default window: the read reopens it
	cin, cout := c.(*tickwire.TCPConn).Info().SegmentsReceived, c.(*tickwire.TCPConn).Info().SegmentsSent
	for range rounds {
		readWhenWaiting(t, c, msg, func() {
			if _, err := s.Write(msg); err != nil {
				t.Fatal(err)
			}
		})
	}
	info := c.(*tickwire.TCPConn).Info()
	in, out := info.SegmentsReceived-cin, info.SegmentsSent-cout
	// A segment that finds the reader busy goes the stock way (a
	// processor's ACK, then the read's window update): a few may.
	if out > in+rounds/4 {
		t.Errorf("the reader sent %d segments for %d received; want about one each", out, in)
	}
}

// TestHandlerHandoff: in stock mode a handler's goroutine waits in
// hand-off between drains, as a Read does, so a request for it is
// processed there and answered byte-exact; and every segment handed over
// is counted out and back in (a count that leaked would make each later
// delivery yield its processor).
func TestHandlerHandoff(t *testing.T) {
	p, c, s := stockPairStacks(t)
	if err := s.(*tickwire.TCPConn).OnReceive(func(sc *tickwire.TCPConn, data []byte, _ error) {
		sc.Write(data)
	}); err != nil {
		t.Fatal(err)
	}
	const rounds = 50
	msg := seededPattern(5, 100)
	got := make([]byte, len(msg))
	c.SetDeadline(time.Now().Add(30 * time.Second))
	for i := range rounds {
		msg[0] = byte(i)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("round %d: echoed %x, want %x", i, got, msg)
		}
	}
	// A request finds the handler's goroutine still draining (or the
	// endpoint busy) now and then; fifty cannot all.
	if n := tickwire.HandedOff(s); n == 0 {
		t.Errorf("no request was handed to the handler's goroutine in %d rounds", rounds)
	}
	for _, st := range []*tickwire.Stack{p.a, p.b} {
		if !waitFor(10*time.Second, func() bool { return tickwire.HandsOut(st) == 0 }) {
			t.Errorf("%d segments handed over and never processed", tickwire.HandsOut(st))
		}
	}
}
