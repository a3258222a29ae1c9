package tickwire_test

import (
	"io"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// tcpFlagsSegment is a 20-byte TCP header from src to dst with flags.
func tcpFlagsSegment(src, dst netip.AddrPort, flags header.TCPFlags) []byte {
	t := make([]byte, header.TCPMinimumSize)
	h := header.TCP(t)
	h.Encode(&header.TCPFields{SrcPort: src.Port(), DstPort: dst.Port(), SeqNum: 1, DataOffset: header.TCPMinimumSize, Flags: flags, WindowSize: 65535})
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom4(src.Addr().As4()), tcpip.AddrFrom4(dst.Addr().As4()), uint16(len(t)))
	h.SetChecksum(^checksum.Checksum(t, xsum))
	return t
}

// TestOddTCPSegmentsCounted checks the counters of segments netstack
// discards without one: NULL and FIN-only segments (TCPNoACKRx) and SYNs
// nobody can answer (DropTCPSYNSource), and that the listener keeps
// serving.
func TestOddTCPSegmentsCounted(t *testing.T) {
	p := newPair(t, nil)
	p.serveEcho(t)
	for _, tc := range []struct {
		name          string
		src           string
		flags         header.TCPFlags
		noACK, source uint64
	}{
		{"NULL", "10.0.0.1", 0, 1, 0},
		{"FIN only", "10.0.0.1", header.TCPFlagFin, 1, 0},
		{"FIN PSH URG", "10.0.0.1", header.TCPFlagFin | header.TCPFlagPsh | header.TCPFlagUrg, 1, 0},
		{"SYN from the subnet broadcast", "10.0.0.255", header.TCPFlagSyn, 0, 1},
		{"SYN from the broadcast address", "255.255.255.255", header.TCPFlagSyn, 0, 1},
		{"SYN from a multicast address", "224.0.0.1", header.TCPFlagSyn, 0, 1},
		{"SYN from 0.0.0.0", "0.0.0.0", header.TCPFlagSyn, 0, 1},
		{"SYN from our own address", "10.0.0.2", header.TCPFlagSyn, 0, 1},
		{"SYN from off the subnet, no gateway", "192.168.9.9", header.TCPFlagSyn, 0, 1},
		{"RST", "10.0.0.1", header.TCPFlagRst, 0, 0},
	} {
		before := p.b.Stats()
		src := netip.AddrPortFrom(netip.MustParseAddr(tc.src), 4444)
		seg := tcpFlagsSegment(src, addrPort(addrB, 7), tc.flags)
		if err := p.pa.Send(ethernet(p.pb.MAC(), p.pa.MAC(), uint16(header.IPv4ProtocolNumber), ipv4Packet(src.Addr(), addrB.Addr(), uint8(header.TCPProtocolNumber), seg))); err != nil {
			t.Fatal(err)
		}
		after := p.b.Stats()
		if got := after.TCPNoACKRx - before.TCPNoACKRx; got != tc.noACK {
			t.Errorf("%s: TCPNoACKRx +%d, want +%d", tc.name, got, tc.noACK)
		}
		if got := after.DropTCPSYNSource - before.DropTCPSYNSource; got != tc.source {
			t.Errorf("%s: DropTCPSYNSource +%d, want +%d", tc.name, got, tc.source)
		}
	}
	c := p.dialEcho(t)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("still")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "still" {
		t.Fatalf("echo after the odd segments: %q, %v", buf, err)
	}
}
