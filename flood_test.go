package tickwire_test

import (
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// TestListenQueueBound: segments without payload for a listener that
// processes nothing (held, as a listener is when its processing falls
// behind a flood) stop queueing at its bound and are counted; a client's
// retransmitted SYN and its first data still get in; once the listener
// runs again it answers what it took and serves new clients. Before the
// bound, netstack queued every one of them.
func TestListenQueueBound(t *testing.T) {
	p, ln, server, syn := synTarget(t)

	release := tickwire.HoldListener(ln)
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	const n = 4000 // about 3 MiB of queued segments without the bound
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		if err := p.pa.Send(syn(uint16(10000 + i))); err != nil {
			t.Fatal(err)
		}
	}
	p.delivered(t)
	runtime.ReadMemStats(&after)
	used, limit := tickwire.ListenerQueued(ln)
	st := p.b.Stats()
	t.Logf("%d SYNs: %d refused, %d retries (false positives), listener holds %d of %d bytes; heap in use %+d KiB",
		n, st.DropTCPQueueFull, st.TCPQueueRetries, used, limit, (int64(after.HeapInuse)-int64(before.HeapInuse))>>10)
	if used > limit {
		t.Errorf("the listener holds %d bytes, more than its %d", used, limit)
	}
	if st.DropTCPQueueFull < n/2 {
		t.Errorf("DropTCPQueueFull = %d after %d SYNs to a held listener, want most of them", st.DropTCPQueueFull, n)
	}
	if st.DropTotal < st.DropTCPQueueFull {
		t.Errorf("DropTotal %d < DropTCPQueueFull %d", st.DropTotal, st.DropTCPQueueFull)
	}

	// The last SYN was refused; sent again, as a client retransmits it,
	// it is taken.
	if err := p.pa.Send(syn(10000 + n - 1)); err != nil {
		t.Fatal(err)
	}
	// A client whose handshake ACK was lost sends data: the reserve takes it.
	data := tcpFrame(p, netip.AddrPortFrom(synSource, 9000), server, 1, 2, header.TCPFlagAck|header.TCPFlagPsh, []byte("data"))
	if err := p.pa.Send(data); err != nil {
		t.Fatal(err)
	}
	st2 := p.b.Stats()
	if st2.TCPQueueRetries-st.TCPQueueRetries != 1 || st2.DropTCPQueueFull != st.DropTCPQueueFull {
		t.Errorf("retransmitted SYN and data: retries %+d, refused %+d; want +1, +0", st2.TCPQueueRetries-st.TCPQueueRetries, st2.DropTCPQueueFull-st.DropTCPQueueFull)
	}

	release()
	held = false
	if !waitFor(10*time.Second, func() bool { used, _ := tickwire.ListenerQueued(ln); return used == 0 }) {
		used, _ := tickwire.ListenerQueued(ln)
		t.Fatalf("the listener still holds %d bytes after its release", used)
	}
	if st := p.b.Stats(); st.TCPSYNCookiesTx == 0 {
		t.Error("no SYN cookie sent for the queued SYNs")
	}
	c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), server)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ping(t, c, "after the flood")
}

// TestListenFlooded: once a listener's queue has been full, it takes no
// more than a burst and its admission rate of first-time SYNs a second,
// even with room in its queue, and refuses (and counts) the rest; a
// refused SYN sent again is taken. The rate is lowered from the default
// 2,000/s to 20/s: on a loaded machine this test's sender, which waits for
// each SYN's processing, manages a few hundred a second.
func TestListenFlooded(t *testing.T) {
	const rate, burst = 20, 8
	p, ln, _, syn := synTarget(t)
	tickwire.SetFloodGate(ln, rate, burst)
	release := tickwire.HoldListener(ln)
	for i := range 1000 { // fills the queue: the listener is flooded
		if err := p.pa.Send(syn(uint16(10000 + i))); err != nil {
			release()
			t.Fatal(err)
		}
	}
	p.delivered(t)
	release()
	if !waitFor(10*time.Second, func() bool { used, _ := tickwire.ListenerQueued(ln); return used == 0 }) {
		t.Fatal("the listener did not empty its queue")
	}
	const n = 5000
	before := p.b.Stats()
	start := time.Now()
	for i := range n {
		if err := p.pa.Send(syn(uint16(20000 + i))); err != nil {
			t.Fatal(err)
		}
	}
	p.delivered(t)
	elapsed := time.Since(start)
	after := p.b.Stats()
	refused := after.DropTCPQueueFull - before.DropTCPQueueFull
	taken := n - refused - (after.TCPQueueRetries - before.TCPQueueRetries)
	// The bucket's burst and rate; and if the wait above outlasted the
	// flooded second, the queue's open part (about 240 segments) first.
	bound := uint64(256 + burst + rate*elapsed.Seconds() + 1)
	t.Logf("%d SYNs in %v to a flooded listener with room: %d taken (bound %d), %d refused, %d false retries",
		n, elapsed, taken, bound, refused, after.TCPQueueRetries-before.TCPQueueRetries)
	if taken > bound {
		t.Errorf("a flooded listener took %d first-time SYNs in %v, want at most %d", taken, elapsed, bound)
	}
	if refused == 0 {
		t.Error("a flooded listener refused nothing")
	}
	// A refused SYN sent again is taken: as a retry, or with a token the
	// bucket earned meanwhile. (Which of the SYNs
	// above were refused depends on the bucket's refill while they were
	// sent: send new ones until one is.)
	send := func(port uint16) (refused bool) {
		before := p.b.Stats().DropTCPQueueFull
		if err := p.pa.Send(syn(port)); err != nil {
			t.Fatal(err)
		}
		p.delivered(t)
		return p.b.Stats().DropTCPQueueFull != before
	}
	port := uint16(30000)
	for ; !send(port); port++ {
		if port == 32000 {
			t.Fatal("a flooded listener took 2000 SYNs in a row")
		}
	}
	if send(port) {
		t.Error("a retransmitted SYN was refused by the flooded listener")
	}
}

// synSource is the address the SYN tests send from.
var synSource = netip.MustParseAddr("10.0.0.3")

// synTarget makes a pair whose B serves echo on echoPort, knows synSource's
// MAC, and whose pipe holds every frame sent (see newPairQueue); syn builds
// a SYN from synSource:port to the listener at server.
func synTarget(t *testing.T) (p *pair, ln *tickwire.TCPListener, server netip.AddrPort, syn func(port uint16) []byte) {
	p = newPairQueue(t, 1<<14, nil)
	ln, err := p.b.ListenTCP(echoPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	echoServer(ln)
	server = addrPort(addrB, echoPort)
	if err := p.pa.Send(arpRequest(net.HardwareAddr{2, 0, 0, 0, 0, 3}, synSource, addrB.Addr())); err != nil {
		t.Fatal(err)
	}
	syn = func(port uint16) []byte {
		return tcpFrame(p, netip.AddrPortFrom(synSource, port), server, uint32(port)*7919, 0, header.TCPFlagSyn, nil)
	}
	return p, ln, server, syn
}

// TestConnQueueBound: an ACK flood on an established connection's own
// addresses and ports, while the connection processes nothing, stops
// queueing 64 KiB past its receive buffer; the connection then carries on.
func TestConnQueueBound(t *testing.T) {
	p := newPairQueue(t, 1<<14, nil) // holds every frame sent: see newPairQueue
	ln, err := p.b.ListenTCP(echoPort)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *tickwire.TCPConn, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, echoPort))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer srv.Close()

	from := client.LocalAddr().(*net.TCPAddr).AddrPort()
	ack := tcpFrame(p, from, addrPort(addrB, echoPort), 1, 1, header.TCPFlagAck, nil)
	release := tickwire.HoldConn(srv)
	const n = 4000
	for range n {
		if err := p.pa.Send(ack); err != nil {
			release()
			t.Fatal(err)
		}
	}
	p.delivered(t)
	used, limit := tickwire.ConnQueued(srv)
	st := p.b.Stats()
	release()
	t.Logf("%d ACKs: %d refused, the connection held %d bytes, receive buffer %d", n, st.DropTCPQueueFull, used, limit)
	if used > limit+64<<10+1024 {
		t.Errorf("the connection held %d bytes, more than its receive buffer %d and 64 KiB", used, limit)
	}
	if st.DropTCPQueueFull < n/2 {
		t.Errorf("DropTCPQueueFull = %d after %d ACKs to a held connection, want most of them", st.DropTCPQueueFull, n)
	}
	go io.Copy(srv, srv)
	ping(t, client, "still there")
}
