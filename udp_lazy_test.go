package tickwire_test

import (
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire"
)

// sendUDPWithOptions injects a datagram from src to dst on B whose IPv4
// header carries 4 bytes of options (NOPs and an end of list), which
// direct delivery leaves to netstack.
func sendUDPWithOptions(t *testing.T, p *pair, src, dst netip.AddrPort, payload []byte) {
	t.Helper()
	plain := ipv4Packet(src.Addr(), dst.Addr(), uint8(header.UDPProtocolNumber), udpDatagram(src, dst, payload))
	ip := make([]byte, len(plain)+4)
	copy(ip, plain[:header.IPv4MinimumSize])
	copy(ip[header.IPv4MinimumSize:], []byte{1, 1, 1, 0})
	copy(ip[header.IPv4MinimumSize+4:], plain[header.IPv4MinimumSize:])
	h := header.IPv4(ip)
	ip[0] = 0x46
	h.SetTotalLength(uint16(len(ip)))
	h.SetChecksum(0)
	h.SetChecksum(^h.CalculateChecksum())
	if err := p.pa.Send(ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ip)); err != nil {
		t.Fatal(err)
	}
}

// TestUDPLazyEndpoint checks that a listening socket makes its netstack
// endpoint only when it needs one, and that everything still works once it
// has: a datagram with IP options reaches a reader and a handler through
// netstack, a joined group holds, and a port closed with its endpoint can
// be opened again.
func TestUDPLazyEndpoint(t *testing.T) {
	p := newPair(t, staticARP)
	src := netip.AddrPortFrom(addrA.Addr(), 5555)
	ln, err := p.b.ListenUDP(9030)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 4)
	h, err := p.b.ServeUDP(9031, func(_ *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		if from == src {
			got <- string(payload)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i, c := range []*tickwire.UDPConn{ln, h} {
		sendUDP(t, p, src, addrPort(addrB, 9030+uint16(i)), []byte("plain"), nil)
		if tickwire.HasNetstackEndpoint(c) {
			t.Fatalf("%v made a netstack endpoint for a plain datagram", c.LocalAddr())
		}
	}

	ln.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	sendUDPWithOptions(t, p, src, addrPort(addrB, 9030), []byte("with options"))
	for _, want := range []string{"plain", "with options"} {
		if n, from, err := ln.ReadFromUDPAddrPort(buf); err != nil || string(buf[:n]) != want || from != src {
			t.Fatalf("read %q from %v, %v; want %q from %v", buf[:n], from, err, want, src)
		}
	}
	sendUDPWithOptions(t, p, src, addrPort(addrB, 9031), []byte("with options"))
	for _, want := range []string{"plain", "with options"} {
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("the handler got %q, want %q", s, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the handler did not get %q; stats %+v", want, p.b.Stats())
		}
	}
	if !tickwire.HasNetstackEndpoint(ln) || !tickwire.HasNetstackEndpoint(h) {
		t.Error("a datagram with IP options reached a socket without a netstack endpoint")
	}

	// A membership lives in the netstack endpoint; Close lets go of the
	// port for the next socket's endpoint.
	group := netip.MustParseAddr("239.1.2.3")
	for range 2 {
		m, err := p.b.ListenUDP(9032)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.JoinGroup(group); err != nil {
			t.Fatal(err)
		}
		if !tickwire.HasNetstackEndpoint(m) {
			t.Error("JoinGroup without a netstack endpoint")
		}
		m.Close()
	}
}
