package tickwire_test

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// TestUDPEcho runs an echo server on B and a client on A, on ports 1, 7 and
// 65535.
func TestUDPEcho(t *testing.T) {
	p := newPair(t, nil)
	for _, port := range []uint16{1, 7, 65535} {
		srv, err := p.b.ListenUDP(port)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := srv.ReadFrom(buf)
				if err != nil {
					return
				}
				srv.WriteTo(buf[:n], from)
			}
		}()
		c, err := p.a.DialUDP(addrPort(addrB, port))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		for i, size := range []int{1, 100, 1472} {
			msg := randomBytes(size, uint64(i))
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 2048)
			n, err := c.Read(got)
			if err != nil {
				t.Fatalf("port %d size %d: %v", port, size, err)
			}
			if !bytes.Equal(got[:n], msg) {
				t.Fatalf("port %d: echo of %d bytes differs", port, size)
			}
		}
		c.Close()
		srv.Close()
	}
	if st := p.b.Stats(); st.UDPRxPackets < 9 || st.UDPTxPackets < 9 {
		t.Errorf("B counted %d UDP in, %d out; want >= 9 each", st.UDPRxPackets, st.UDPTxPackets)
	}
}

// TestUDPBadChecksum injects a datagram with a wrong checksum: it must be
// dropped and counted, while the same datagram with the right checksum
// arrives.
func TestUDPBadChecksum(t *testing.T) {
	p := newPair(t, nil)
	srv, err := p.b.ListenUDP(4000)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	src := netip.AddrPortFrom(addrA.Addr(), 1234)
	good := udpDatagram(src, addrPort(addrB, 4000), []byte("good"))
	bad := udpDatagram(src, addrPort(addrB, 4000), []byte("bad!"))
	bad[6] ^= 0x55 // checksum field
	for _, d := range [][]byte{bad, good} {
		if err := p.pa.Send(ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ipv4Packet(addrA.Addr(), addrB.Addr(), uint8(header.UDPProtocolNumber), d))); err != nil {
			t.Fatal(err)
		}
	}
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, _, err := srv.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "good" {
		t.Fatalf("read %q, %v; want \"good\"", buf[:n], err)
	}
	if got := p.b.Stats().DropUDPChecksum; got != 1 {
		t.Errorf("DropUDPChecksum = %d, want 1", got)
	}
}

// TestUDPNoListener checks that a datagram to a closed port is counted and
// answered with ICMP port unreachable.
func TestUDPNoListener(t *testing.T) {
	p := newPair(t, nil)
	c, err := p.a.DialUDP(addrPort(addrB, 4001))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("anyone?"))
	deadline := time.Now().Add(5 * time.Second)
	for p.b.Stats().DropUDPNoListener == 0 || p.b.Stats().ICMPUnreachableTx == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", p.b.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPing pings B from A; B's netstack answers.
func TestPing(t *testing.T) {
	p := newPair(t, nil)
	for range 3 {
		rtt, err := p.a.Ping(ctxTimeout(t, 5*time.Second), addrB.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if rtt <= 0 {
			t.Errorf("rtt %v", rtt)
		}
	}
	// netstack counts a reply once its write returns, which over link/pipe
	// can be after the reply has reached A.
	settled(func() bool { st := p.b.Stats(); return st.ICMPEchoRepliesTx == 3 })
	if st := p.b.Stats(); st.ICMPEchoRequestsRx != 3 || st.ICMPEchoRepliesTx != 3 {
		t.Errorf("B: %d echo requests in, %d replies out; want 3, 3", st.ICMPEchoRequestsRx, st.ICMPEchoRepliesTx)
	}
	if st := p.a.Stats(); st.ICMPEchoRequestsTx != 3 || st.ICMPEchoRepliesRx != 3 {
		t.Errorf("A: %d echo requests out, %d replies in; want 3, 3", st.ICMPEchoRequestsTx, st.ICMPEchoRepliesRx)
	}
}

// TestPingNobody pings an address nobody holds: ARP gives up after
// ARPTimeout and Ping fails with EHOSTUNREACH; off-link without a gateway it
// fails with ENETUNREACH.
func TestPingNobody(t *testing.T) {
	p := newPair(t, nil)
	_, err := p.a.Ping(ctxTimeout(t, 5*time.Second), netip.MustParseAddr("10.0.0.99"))
	var op *net.OpError
	if !errors.As(err, &op) || !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("err = %v, want a *net.OpError wrapping EHOSTUNREACH", err)
	}
	if _, err := p.a.Ping(ctxTimeout(t, 5*time.Second), netip.MustParseAddr("192.0.2.1")); !errors.Is(err, syscall.ENETUNREACH) {
		t.Fatalf("off-link: %v, want ENETUNREACH", err)
	}
}

// TestDroppedFrames injects frames tickwire does not speak and bad IPv4
// headers: each is dropped and counted, and the stack keeps serving.
func TestDroppedFrames(t *testing.T) {
	p := newPair(t, nil)
	dst, src := p.pb.MAC(), p.pa.MAC()
	ipPayload := ipv4Packet(addrA.Addr(), addrB.Addr(), uint8(header.UDPProtocolNumber), udpDatagram(netip.AddrPortFrom(addrA.Addr(), 1), addrPort(addrB, 9), []byte("x")))
	badSum := append([]byte(nil), ipPayload...)
	badSum[10] ^= 0xff
	truncated := ipPayload[:header.IPv4MinimumSize-4]
	for _, f := range [][]byte{
		ethernet(dst, src, 0x86dd, ipPayload), // IPv6
		ethernet(dst, src, 0x88b5, []byte("local experimental")),
		ethernet(dst, src, 0x8100, ipPayload), // VLAN tag
		ethernet(dst, src, uint16(header.IPv4ProtocolNumber), badSum),
		ethernet(dst, src, uint16(header.IPv4ProtocolNumber), truncated),
		ethernet(dst, src, uint16(header.IPv4ProtocolNumber), ipv4Packet(addrA.Addr(), addrB.Addr(), 47, []byte("GRE"))),
	} {
		if err := p.pa.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	st := p.b.Stats()
	if st.DropEtherType != 3 {
		t.Errorf("DropEtherType = %d, want 3", st.DropEtherType)
	}
	if st.DropIPv4Checksum != 1 {
		t.Errorf("DropIPv4Checksum = %d, want 1", st.DropIPv4Checksum)
	}
	if st.DropIPv4Malformed != 1 {
		t.Errorf("DropIPv4Malformed = %d, want 1", st.DropIPv4Malformed)
	}
	if st.DropIPv4Protocol != 1 {
		t.Errorf("DropIPv4Protocol = %d, want 1", st.DropIPv4Protocol)
	}
	if _, err := p.a.Ping(ctxTimeout(t, 5*time.Second), addrB.Addr()); err != nil {
		t.Fatalf("B stopped answering: %v", err)
	}
}
