package tickwire_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire"
)

// closeFirst dials from B to A's echo server, echoes a byte and closes
// first, so that B's side enters TIME-WAIT once A's echo goroutine closes
// too. It returns B's address and port.
func closeFirst(t testing.TB, p *pair) netip.AddrPort {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.b.DialTCP(ctx, addrPort(addrA, echoPort))
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{1}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	local := c.LocalAddr().(*net.TCPAddr).AddrPort()
	c.Close()
	return local
}

// TestTimeWaitRecord: a connection closed first is held in TIME-WAIT as a
// record for Config.TimeWait, then forgotten; the bound Config.MaxTimeWait
// drops the connections beyond it, counted.
func TestTimeWaitRecord(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) { c.TimeWait = time.Second; c.MaxTimeWait = 2 })
	serveEchoOn(t, p.a)
	start := time.Now()
	for range 3 {
		closeFirst(t, p)
	}
	if !waitFor(5*time.Second, func() bool { st := p.b.Stats(); return st.TCPTimeWait+st.TCPTimeWaitOverflow == 3 }) {
		st := p.b.Stats()
		t.Fatalf("TCPTimeWait %d, TCPTimeWaitOverflow %d; want 2 and 1", st.TCPTimeWait, st.TCPTimeWaitOverflow)
	}
	if st := p.b.Stats(); st.TCPTimeWait != 2 || st.TCPTimeWaitOverflow != 1 {
		t.Errorf("TCPTimeWait %d, TCPTimeWaitOverflow %d; want 2 and 1", st.TCPTimeWait, st.TCPTimeWaitOverflow)
	}
	if st := p.a.Stats(); st.TCPTimeWait != 0 {
		t.Errorf("A, which closed second, holds %d connections in TIME-WAIT", st.TCPTimeWait)
	}
	if !waitFor(10*time.Second, func() bool { return p.b.Stats().TCPTimeWait == 0 }) {
		t.Fatalf("%d connections still in TIME-WAIT %v after the closes (TimeWait 1 s)", p.b.Stats().TCPTimeWait, time.Since(start))
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("TIME-WAIT ended after %v, before TimeWait (1 s)", took)
	}
}

// twProbe is a connection of B's in TIME-WAIT and what B sends for it.
type twProbe struct {
	p        *pair
	a, b     netip.AddrPort // A's (the echo server's) and B's ends
	snd, rcv uint32         // B's SndNxt and RcvNxt, from its last ACK
	log      *segmentLog    // B's segments for the tuple since the last reset
}

// segmentLog collects TCP segments from a sniffer.
type segmentLog struct {
	mu sync.Mutex
	// +checklocks:mu
	segs []header.TCP
}

func (l *segmentLog) add(h header.TCP) {
	l.mu.Lock()
	l.segs = append(l.segs, h)
	l.mu.Unlock()
}

// newTWProbe leaves one connection of B's in TIME-WAIT and watches B's
// segments for it.
func newTWProbe(t *testing.T) *twProbe {
	p := newPair(t, nil)
	serveEchoOn(t, p.a)
	pr := &twProbe{p: p, a: addrPort(addrA, echoPort), log: new(segmentLog)}
	var mu sync.Mutex
	var last header.TCP
	p.pb.SetSniffer(func(frame []byte) {
		h, _, ok := tcpSegment(frame)
		if !ok || h.DestinationPort() != echoPort {
			return
		}
		h = append(header.TCP(nil), h...)
		mu.Lock()
		last = h
		mu.Unlock()
		pr.log.add(h)
	})
	pr.b = closeFirst(t, p)
	// B counts the connection in TIME-WAIT when it enters the state, which
	// can be before its final ACK has passed the sniffer: wait for both.
	// The checks run on a copy, never with mu held (a Fatalf under mu
	// would leave the sniffer, and with it the stack's Close, blocked).
	lastSeen := func() header.TCP {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
	if !waitFor(5*time.Second, func() bool {
		h := lastSeen()
		return p.b.Stats().TCPTimeWait == 1 && h != nil && h.Flags() == header.TCPFlagAck
	}) {
		t.Fatalf("TCPTimeWait = %d, B's last segment %v; want 1 and its final ACK", p.b.Stats().TCPTimeWait, lastSeen())
	}
	h := lastSeen()
	pr.snd, pr.rcv = h.SequenceNumber(), h.AckNumber()
	pr.reset()
	return pr
}

func (pr *twProbe) reset() {
	pr.log.mu.Lock()
	pr.log.segs = nil
	pr.log.mu.Unlock()
}

func (pr *twProbe) segments() []header.TCP {
	pr.log.mu.Lock()
	defer pr.log.mu.Unlock()
	return append([]header.TCP(nil), pr.log.segs...)
}

// send injects a segment from A's end of the connection to B and waits
// for B to have handled it.
func (pr *twProbe) send(t *testing.T, seq, ack uint32, flags header.TCPFlags, payload []byte) {
	t.Helper()
	if err := pr.p.pa.Send(tcpFrame(pr.p, pr.a, pr.b, seq, ack, flags, payload)); err != nil {
		t.Fatal(err)
	}
	pr.p.delivered(t)
}

// TestTimeWaitAnswers: B's TIME-WAIT record answers A's segments as RFC
// 9293 and netstack's handleTimeWaitSegment do: a retransmitted FIN, a
// segment out of window or with data, and an old SYN get an ACK with the
// connection's numbers (the SYN's is RFC 5961's challenge ACK, as Linux
// sends); a duplicate ACK, a RST and a segment without ACK get nothing
// and leave the record; a corrupt segment is dropped and counted in
// DropTCPChecksum; a SYN above the old receive point frees the tuple.
func TestTimeWaitAnswers(t *testing.T) {
	pr := newTWProbe(t)
	acked := func(name string) {
		t.Helper()
		var segs []header.TCP
		waitFor(5*time.Second, func() bool { segs = pr.segments(); return len(segs) > 0 })
		if len(segs) != 1 || segs[0].Flags() != header.TCPFlagAck || segs[0].SequenceNumber() != pr.snd || segs[0].AckNumber() != pr.rcv {
			t.Errorf("%s: B sent %d segments (first %v), want one ACK seq %d ack %d", name, len(segs), first(segs), pr.snd, pr.rcv)
		}
		pr.reset()
	}
	silent := func(name string) {
		t.Helper()
		if segs := pr.segments(); len(segs) != 0 {
			t.Errorf("%s: B sent %d segments (first %v), want none", name, len(segs), segs[0])
		}
		pr.reset()
	}
	pr.send(t, pr.rcv-1, pr.snd, header.TCPFlagFin|header.TCPFlagAck, nil)
	acked("retransmitted FIN")
	pr.send(t, pr.rcv+1000, pr.snd, header.TCPFlagAck, nil)
	acked("out of window")
	pr.send(t, pr.rcv, pr.snd, header.TCPFlagAck|header.TCPFlagPsh, []byte("late"))
	acked("data")
	pr.send(t, pr.rcv-5, 0, header.TCPFlagSyn, nil)
	acked("old SYN")
	pr.send(t, pr.rcv, pr.snd, header.TCPFlagAck, nil)
	silent("duplicate ACK")
	pr.send(t, pr.rcv, 0, header.TCPFlagRst, nil)
	silent("RST")
	pr.send(t, pr.rcv, 0, header.TCPFlagFin, nil)
	silent("FIN without ACK")
	if n := pr.p.b.Stats().TCPTimeWait; n != 1 {
		t.Fatalf("TCPTimeWait = %d after the probes, want 1", n)
	}

	bad := tcpFrame(pr.p, pr.a, pr.b, pr.rcv+1000, pr.snd, header.TCPFlagAck, nil)
	bad[len(bad)-1] ^= 0xff // the urgent pointer: the checksum no longer matches
	before := pr.p.b.Stats().DropTCPChecksum
	if err := pr.p.pa.Send(bad); err != nil {
		t.Fatal(err)
	}
	pr.p.delivered(t)
	if got := pr.p.b.Stats().DropTCPChecksum; got != before+1 {
		t.Errorf("DropTCPChecksum %d after a corrupt segment for the tuple, want %d", got, before+1)
	}
	silent("corrupt segment")

	pr.send(t, pr.rcv+1<<20, 0, header.TCPFlagSyn, nil)
	if n := pr.p.b.Stats().TCPTimeWait; n != 0 {
		t.Errorf("TCPTimeWait = %d after a new SYN above the receive point, want 0", n)
	}
	// Nobody listens on B's port: netstack refuses the new connection
	// with a RST, or, while its endpoint is still closing (its zero
	// TIME-WAIT runs on a timer goroutine), drops it; the record does not
	// answer it.
	for _, h := range pr.segments() {
		if h.Flags()&header.TCPFlagRst == 0 {
			t.Errorf("B answered a new SYN on a port without listener with %v, want a RST or nothing", h)
		}
	}
}

func first(segs []header.TCP) any {
	if len(segs) == 0 {
		return nil
	}
	return segs[0]
}

// TestTimeWaitRedial: a dial that takes the local port of a connection in
// TIME-WAIT to the same server ends the TIME-WAIT and connects.
func TestTimeWaitRedial(t *testing.T) {
	p := newPair(t, nil)
	serveEchoOn(t, p.a)
	local := closeFirst(t, p)
	if !waitFor(5*time.Second, func() bool { return p.b.Stats().TCPTimeWait == 1 }) {
		t.Fatalf("TCPTimeWait = %d, want 1", p.b.Stats().TCPTimeWait)
	}
	// The record exists once netstack entered TIME-WAIT; the endpoint,
	// with its port, goes a moment later, on a netstack timer goroutine.
	d := tickwire.Dialer{Stack: p.b, LocalAddr: &net.TCPAddr{Port: int(local.Port())}, Timeout: 5 * time.Second}
	var c net.Conn
	var err error
	waitFor(5*time.Second, func() bool {
		c, err = d.Dial("tcp", addrPort(addrA, echoPort).String())
		return !errors.Is(err, syscall.EADDRINUSE)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ping(t, c, "again")
	if n := p.b.Stats().TCPTimeWait; n != 0 {
		t.Errorf("TCPTimeWait = %d with a new connection on the tuple, want 0", n)
	}
}

// TestTimeWaitMemory: connections in TIME-WAIT cost a small record each
// (the goal: at most 512 bytes of heap), not a netstack endpoint
// (about 8 KB), and the records go when TIME-WAIT ends.
func TestTimeWaitMemory(t *testing.T) {
	// Enough connections that the few endpoints still closing, and the
	// map's growth step, weigh little per record.
	n := 5000
	if raceEnabled {
		n = 1000
	}
	p := newPair(t, func(c *tickwire.Config) { c.MaxConnections = 1024 })
	serveEchoOn(t, p.a)
	closeFirst(t, p) // warm up: pools and timers' first allocations
	if !waitFor(10*time.Second, func() bool { return p.b.Stats().TCPTimeWait == 1 }) {
		t.Fatal("the first connection is not in TIME-WAIT")
	}
	h0 := heapInUse()
	for range n {
		closeFirst(t, p)
	}
	if !waitFor(10*time.Second, func() bool { return p.b.Stats().TCPTimeWait > uint64(n)*9/10 }) {
		t.Fatalf("TCPTimeWait = %d after %d connections closed first", p.b.Stats().TCPTimeWait, n)
	}
	h1 := heapInUse()
	tw := p.b.Stats().TCPTimeWait - 1
	per := (float64(h1) - float64(h0)) / float64(tw)
	t.Logf("%d connections in TIME-WAIT: heap %d -> %d, %.0f bytes each", tw, h0, h1, per)
	// Under the race detector fewer connections leave the fixed part
	// (endpoints still closing) a larger share.
	limit := 512.0
	if raceEnabled {
		limit = 1024
	}
	if per > limit {
		t.Errorf("%.0f bytes of heap per connection in TIME-WAIT, want at most %.0f", per, limit)
	}
}

// heapInUse returns the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
