package tickwire_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/tickwire/tickwire"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Tests of what keeps a vanished or silent peer from holding connection
// slots for good (issue 12): the per-source limit, TCP keepalive and the
// idle timeout.

// serveRecording makes s serve TCP echo on port until the end of the test
// and sends, for each connection, the error that ended its echo (nil after
// the peer's FIN), then closes the connection.
func serveRecording(t *testing.T, s *tickwire.Stack, port uint16) <-chan error {
	t.Helper()
	ln, err := s.ListenTCP(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ended := make(chan error, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, err := io.Copy(c, c)
				c.Close()
				ended <- err
			}()
		}
	}()
	return ended
}

// waitFor polls cond every millisecond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// tcpFrame builds an Ethernet/IPv4/TCP frame from A's pipe end to B, as if
// from src.
func tcpFrame(p *pair, src, dst netip.AddrPort, seq, ack uint32, flags header.TCPFlags, payload []byte) []byte {
	seg := make([]byte, header.TCPMinimumSize+len(payload))
	h := header.TCP(seg)
	h.Encode(&header.TCPFields{SrcPort: src.Port(), DstPort: dst.Port(), SeqNum: seq, AckNum: ack,
		DataOffset: header.TCPMinimumSize, Flags: flags, WindowSize: 65535})
	copy(seg[header.TCPMinimumSize:], payload)
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom4(src.Addr().As4()), tcpip.AddrFrom4(dst.Addr().As4()), uint16(len(seg)))
	h.SetChecksum(^checksum.Checksum(seg, xsum))
	return ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ipv4Packet(src.Addr(), dst.Addr(), uint8(header.TCPProtocolNumber), seg))
}

// TestConnectionLimitPerSource: B allows 8 connections, so 4 per source by
// default. A's fifth is reset although B has room; a connection from
// another address (a hand-made peer on A's side of the pipe) is then
// accepted and echoed; Stats count the refusal apart from ConnsRefused.
func TestConnectionLimitPerSource(t *testing.T) {
	const perSource = 4
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrB {
			c.MaxConnections = 2 * perSource
		}
	})
	p.serveEcho(t)
	if got := p.b.Config().MaxConnectionsPerSource; got != perSource {
		t.Fatalf("MaxConnectionsPerSource = %d, want %d", got, perSource)
	}
	for i := range perSource {
		c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, echoPort))
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		ping(t, c, "hello")
	}
	extra, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, echoPort))
	if err == nil {
		extra.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = extra.Read(make([]byte, 1))
		extra.Close()
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection %d from A: err = %v, want a reset", perSource+1, err)
	}

	// Another host, 10.0.0.3, introduces itself with an ARP request, then
	// shakes hands by hand; B's frames to it are captured at B's end.
	other := netip.MustParseAddrPort("10.0.0.3:40000")
	server := addrPort(addrB, echoPort)
	var cap capture
	p.pb.SetSniffer(cap.record)
	defer p.pb.SetSniffer(nil)
	if err := p.pa.Send(arpRequest(net.HardwareAddr{2, 0, 0, 0, 0, 3}, other.Addr(), addrB.Addr())); err != nil {
		t.Fatal(err)
	}
	const iss = 1000
	syn := ipv4Packet(other.Addr(), server.Addr(), uint8(header.TCPProtocolNumber), tcpSYN(other, server, iss, 1408))
	if err := p.pa.Send(ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), syn)); err != nil {
		t.Fatal(err)
	}
	toOther := func(want func(header.TCP, []byte) bool) bool {
		for _, f := range cap.snapshot() {
			tcp, n, ok := tcpSegment(f)
			ip := header.IPv4(f[header.EthernetMinimumSize:])
			if ok && ip.DestinationAddress() == tcpip.AddrFrom4(other.Addr().As4()) && tcp.DestinationPort() == other.Port() &&
				want(tcp, tcp[len(tcp)-n:]) {
				return true
			}
		}
		return false
	}
	var synAck header.TCP
	if !waitFor(5*time.Second, func() bool {
		return toOther(func(tcp header.TCP, _ []byte) bool {
			synAck = append(header.TCP(nil), tcp...)
			return tcp.Flags() == header.TCPFlagSyn|header.TCPFlagAck
		})
	}) {
		t.Fatal("no SYN-ACK to the other host")
	}
	ack := synAck.SequenceNumber() + 1
	if err := p.pa.Send(tcpFrame(p, other, server, iss+1, ack, header.TCPFlagAck, nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.pa.Send(tcpFrame(p, other, server, iss+1, ack, header.TCPFlagAck|header.TCPFlagPsh, []byte("other"))); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool {
		return toOther(func(_ header.TCP, payload []byte) bool { return bytes.Equal(payload, []byte("other")) })
	}) {
		t.Fatal("the other host's connection was not echoed")
	}
	if toOther(func(tcp header.TCP, _ []byte) bool { return tcp.Flags()&header.TCPFlagRst != 0 }) {
		t.Error("B reset the other host's connection")
	}
	st := p.b.Stats()
	if st.ConnsRefusedPerSource != 1 || st.ConnsRefused != 0 || st.ConnsAccepted != perSource+1 {
		t.Errorf("B: refused per source %d, refused %d, accepted %d; want 1, 0, %d",
			st.ConnsRefusedPerSource, st.ConnsRefused, st.ConnsAccepted, perSource+1)
	}
	p.pa.Send(tcpFrame(p, other, server, iss+6, ack, header.TCPFlagRst, nil)) // the other host leaves
}

// TestConnectionLimitPerSourceFreed: closing a connection frees its
// source's slot.
func TestConnectionLimitPerSourceFreed(t *testing.T) {
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrB {
			c.MaxConnectionsPerSource = 1
		}
	})
	p.serveEcho(t)
	for i := range 3 {
		c, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, echoPort))
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		ping(t, c, "one at a time")
		c.Close()
		if !waitFor(5*time.Second, func() bool { return p.b.Stats().ConnsOpen == 0 }) {
			t.Fatalf("B holds %d connections after connection %d closed", p.b.Stats().ConnsOpen, i)
		}
	}
	if st := p.b.Stats(); st.ConnsRefusedPerSource != 0 || st.ConnsAccepted != 3 {
		t.Errorf("B: refused per source %d, accepted %d; want 0, 3", st.ConnsRefusedPerSource, st.ConnsAccepted)
	}
}

// TestKeepaliveVanishedPeer: B probes an idle connection; while A answers
// it lives on, and once A vanishes (its end of the pipe stops receiving) B
// resets it within the keepalive time, its Read fails with ETIMEDOUT and
// the slot comes back.
func TestKeepaliveVanishedPeer(t *testing.T) {
	const idle, interval, count = 200 * time.Millisecond, 50 * time.Millisecond, 3
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrB {
			c.KeepaliveIdle, c.KeepaliveInterval, c.KeepaliveCount = idle, interval, count
		}
	})
	var cap capture
	p.pb.SetSniffer(cap.record)
	defer p.pb.SetSniffer(nil)
	ended := serveRecording(t, p.b, echoPort)
	c := p.dialEcho(t)
	ping(t, c, "before")

	// A live peer answers the probes: after three idle times B has probed
	// and the connection still echoes.
	probes := func() int {
		n := 0
		for _, f := range cap.snapshot() {
			if tcp, payload, ok := tcpSegment(f); ok && payload == 0 && tcp.Flags() == header.TCPFlagAck && tcp.SourcePort() == echoPort {
				n++
			}
		}
		return n
	}
	before := probes()
	if !waitFor(10*time.Second, func() bool { return probes() >= before+2 }) {
		t.Fatalf("B sent %d keepalive probes (pure ACKs) on an idle connection, want 2", probes()-before)
	}
	ping(t, c, "alive")
	if st := p.b.Stats(); st.TCPPeerTimeouts != 0 {
		t.Fatalf("B timed out %d connections of a live peer", st.TCPPeerTimeouts)
	}

	// A vanishes: B's frames no longer reach it.
	vanished := time.Now()
	p.pa.Close()
	select {
	case err := <-ended:
		took := time.Since(vanished)
		if !errors.Is(err, syscall.ETIMEDOUT) {
			t.Errorf("B's echo ended with %v, want ETIMEDOUT", err)
		}
		// The last answer came at most one interval before A vanished.
		if limit := idle + count*interval; took < limit-interval || took > limit+5*time.Second {
			t.Errorf("B found the vanished peer after %v, want about %v", took, limit)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B did not find the vanished peer in 10 s")
	}
	if st := p.b.Stats(); st.TCPPeerTimeouts != 1 || st.ConnsOpen != 0 {
		t.Errorf("B: peer timeouts %d, open %d; want 1, 0", st.TCPPeerTimeouts, st.ConnsOpen)
	}
}

// TestIdleTimeout: B resets connections on which nothing moved for
// IdleTimeout, read through net.Conn or handed to an OnReceive handler,
// and leaves an active one alone.
func TestIdleTimeout(t *testing.T) {
	const timeout = time.Second
	p := newPair(t, func(c *tickwire.Config) {
		if c.Addr == addrB {
			c.IdleTimeout = timeout
		}
	})
	ended := serveRecording(t, p.b, echoPort)
	handlerErr := make(chan error, 1)
	hln, err := p.b.ServeTCP(echoPort+1, func(c *tickwire.TCPConn, data []byte, err error) {
		if err != nil {
			handlerErr <- err
			c.Close()
			return
		}
		c.Write(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer hln.Close()

	active := p.dialEcho(t)
	silent := p.dialEcho(t)
	silentH, err := p.a.DialTCP(ctxTimeout(t, 5*time.Second), addrPort(addrB, echoPort+1))
	if err != nil {
		t.Fatal(err)
	}
	defer silentH.Close()
	ping(t, silent, "then silence")
	ping(t, silentH, "then silence")
	start := time.Now()

	type result struct {
		err  error
		took time.Duration
	}
	reset := make(chan result, 2)
	for _, c := range []net.Conn{silent, silentH} {
		go func() {
			c.SetReadDeadline(start.Add(10 * time.Second))
			_, err := c.Read(make([]byte, 1))
			reset <- result{err, time.Since(start)}
		}()
	}
	var got []result
	for len(got) < 2 {
		select {
		case r := <-reset:
			got = append(got, r)
		case <-time.After(100 * time.Millisecond):
			ping(t, active, "busy") // every 100 ms: never idle
		}
	}
	for _, r := range got {
		if !errors.Is(r.err, syscall.ECONNRESET) {
			t.Errorf("silent connection: %v after %v, want a reset", r.err, r.took)
		}
		if r.took < timeout*9/10 || r.took > timeout*5/4+3*time.Second {
			t.Errorf("silent connection reset after %v, want %v to %v", r.took, timeout, timeout*5/4)
		}
	}
	ping(t, active, "still here")

	for name, ch := range map[string]<-chan error{"net.Conn server": ended, "handler": handlerErr} {
		select {
		case err := <-ch:
			if !errors.Is(err, tickwire.ErrIdleTimeout) {
				t.Errorf("%s: connection ended with %v, want ErrIdleTimeout", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the idle connection did not end", name)
		}
	}
	// The sweeper counts a connection after its reset has left, which the
	// peer and the handler may see first.
	if !waitFor(5*time.Second, func() bool { return p.b.Stats().ConnsIdleClosed == 2 }) {
		t.Errorf("B: %d connections closed idle, want 2", p.b.Stats().ConnsIdleClosed)
	}
	if !waitFor(5*time.Second, func() bool { return p.b.Stats().ConnsOpen == 1 }) {
		t.Errorf("B holds %d connections, want the active one", p.b.Stats().ConnsOpen)
	}
}
