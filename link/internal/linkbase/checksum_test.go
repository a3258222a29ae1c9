package linkbase

import (
	"bytes"
	"encoding/binary"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

var (
	srcAddr = tcpip.AddrFrom4([4]byte{10, 1, 2, 3})
	dstAddr = tcpip.AddrFrom4([4]byte{10, 1, 2, 4})
)

// ipv4Packet builds an IPv4 packet around payload with every checksum right:
// the transport checksum is computed by gVisor's header package.
func ipv4Packet(proto tcpip.TransportProtocolNumber, payload []byte) []byte {
	b := make([]byte, header.IPv4MinimumSize+len(payload))
	ip := header.IPv4(b)
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(b)), TTL: 64, Protocol: uint8(proto), SrcAddr: srcAddr, DstAddr: dstAddr})
	ip.SetChecksum(^ip.CalculateChecksum())
	seg := b[header.IPv4MinimumSize:]
	copy(seg, payload)
	switch proto {
	case header.TCPProtocolNumber:
		tcp := header.TCP(seg)
		tcp.Encode(&header.TCPFields{SrcPort: 1, DstPort: 2, SeqNum: 7, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagAck, WindowSize: 100})
		tcp.SetChecksum(0)
		sum := header.PseudoHeaderChecksum(proto, srcAddr, dstAddr, uint16(len(seg)))
		tcp.SetChecksum(^checksum.Checksum(seg, sum))
	case header.UDPProtocolNumber:
		udp := header.UDP(seg)
		udp.Encode(&header.UDPFields{SrcPort: 1, DstPort: 2, Length: uint16(len(seg))})
		sum := header.PseudoHeaderChecksum(proto, srcAddr, dstAddr, uint16(len(seg)))
		udp.SetChecksum(^checksum.Checksum(seg, sum))
	case header.ICMPv4ProtocolNumber:
		icmp := header.ICMPv4(seg)
		icmp.SetType(header.ICMPv4Echo)
		icmp.SetChecksum(0)
		icmp.SetChecksum(^checksum.Checksum(seg, 0))
	}
	return b
}

func flip(b []byte, i int) []byte {
	b = append([]byte(nil), b...)
	b[i] ^= 0x10
	return b
}

func TestVerifyIPv4(t *testing.T) {
	payload := []byte("0123456789abcdef0123456789abcdef0123456789")
	tcp := ipv4Packet(header.TCPProtocolNumber, payload)
	udp := ipv4Packet(header.UDPProtocolNumber, payload)
	icmp := ipv4Packet(header.ICMPv4ProtocolNumber, payload)
	udpNoSum := append([]byte(nil), udp...)
	binary.BigEndian.PutUint16(udpNoSum[header.IPv4MinimumSize+6:], 0)
	udpNoSum[len(udpNoSum)-1] ^= 0xff
	fragment := flip(tcp, len(tcp)-1)
	binary.BigEndian.PutUint16(fragment[6:], 0x2000) // more fragments
	header.IPv4(fragment).SetChecksum(0)
	header.IPv4(fragment).SetChecksum(^header.IPv4(fragment).CalculateChecksum())
	last := len(tcp) - 1
	for _, c := range []struct {
		name string
		b    []byte
		want ChecksumVerdict
	}{
		{"TCP", tcp, ChecksumOK},
		{"UDP", udp, ChecksumOK},
		{"ICMP", icmp, ChecksumOK},
		{"TCP payload changed", flip(tcp, last), BadTCPChecksum},
		{"TCP header changed", flip(tcp, header.IPv4MinimumSize+4), BadTCPChecksum},
		{"UDP payload changed", flip(udp, last), BadUDPChecksum},
		{"UDP without checksum", udpNoSum, ChecksumOK},
		{"ICMP payload changed", flip(icmp, last), BadICMPChecksum},
		{"IPv4 TTL changed", flip(tcp, 8), BadIPv4Checksum},
		{"IPv4 source changed", flip(udp, 12), BadIPv4Checksum},
		{"fragment with wrong TCP sum", fragment, ChecksumOK},
		{"unknown protocol", ipv4Packet(253, payload), ChecksumOK},
		{"short", tcp[:10], ChecksumOK},
		{"total length past the end", tcp[:len(tcp)-5], ChecksumOK},
		{"empty", nil, ChecksumOK},
	} {
		if got := VerifyIPv4(c.b); got != c.want {
			t.Errorf("%s: VerifyIPv4 = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestPseudoHeaderSum(t *testing.T) {
	ip := header.IPv4(ipv4Packet(header.TCPProtocolNumber, make([]byte, header.TCPMinimumSize)))
	for _, n := range []int{0, 20, 1480, 65515} {
		want := header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), uint16(n))
		if got := PseudoHeaderSum(ip, header.TCPProtocolNumber, n); got != want {
			t.Errorf("length %d: %#04x, want %#04x", n, got, want)
		}
	}
}

// FuzzVerifyIPv4 checks VerifyIPv4 against gVisor's own checks on any
// input: it never panics, and its verdicts agree with header.IPv4's and the
// transport headers' checksum validation.
func FuzzVerifyIPv4(f *testing.F) {
	for _, proto := range []tcpip.TransportProtocolNumber{header.TCPProtocolNumber, header.UDPProtocolNumber, header.ICMPv4ProtocolNumber} {
		f.Add(ipv4Packet(proto, []byte("a payload at least as long as a TCP header")))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := VerifyIPv4(b)
		if len(b) < header.IPv4MinimumSize {
			if got != ChecksumOK {
				t.Fatalf("short packet: %d", got)
			}
			return
		}
		ip := header.IPv4(b)
		ihl := int(ip.HeaderLength())
		if ihl < header.IPv4MinimumSize || ihl > len(b) {
			return
		}
		if (got == BadIPv4Checksum) != !ip.IsChecksumValid() {
			t.Fatalf("verdict %d, header checksum valid %v", got, ip.IsChecksumValid())
		}
		total := int(ip.TotalLength())
		if got == BadIPv4Checksum || total < ihl || total > len(b) || ip.More() || ip.FragmentOffset() != 0 {
			return
		}
		seg := b[ihl:total]
		switch ip.TransportProtocol() {
		case header.TCPProtocolNumber:
			if len(seg) < header.TCPMinimumSize {
				return
			}
			tcp := header.TCP(seg)
			off := int(tcp.DataOffset())
			if off < header.TCPMinimumSize || off > len(seg) {
				return
			}
			valid := tcp.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(seg[off:], 0), uint16(len(seg)-off))
			if valid != (got == ChecksumOK) {
				t.Fatalf("TCP: verdict %d, gVisor says valid %v", got, valid)
			}
		case header.UDPProtocolNumber:
			if len(seg) < header.UDPMinimumSize || int(header.UDP(seg).Length()) != len(seg) {
				return
			}
			u := header.UDP(seg)
			valid := u.Checksum() == 0 || u.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(u.Payload(), 0))
			if valid != (got == ChecksumOK) {
				t.Fatalf("UDP: verdict %d, gVisor says valid %v", got, valid)
			}
		}
	})
}

// TestCompleteChecksums: a TCP segment whose checksum field holds the
// pseudo-header's sum, as GSO leaves it, gets the checksum gVisor computes
// for the whole segment, and so does a UDP datagram; a complete checksum,
// or a frame that is not whole IPv4 TCP or UDP, is left alone.
func TestCompleteChecksums(t *testing.T) {
	eth := func(ip []byte) []byte { return append(make([]byte, HeaderLength), ip...) }
	for _, proto := range []tcpip.TransportProtocolNumber{header.TCPProtocolNumber, header.UDPProtocolNumber} {
		want := eth(ipv4Packet(proto, []byte("a payload of some length, odd: 37 byt")))
		header.Ethernet(want).Encode(&header.EthernetFields{Type: header.IPv4ProtocolNumber})
		got := append([]byte(nil), want...)
		seg := got[HeaderLength+header.IPv4MinimumSize:]
		off := header.TCPChecksumOffset
		if proto == header.UDPProtocolNumber {
			off = 6
		}
		binary.BigEndian.PutUint16(seg[off:], header.PseudoHeaderChecksum(proto, srcAddr, dstAddr, uint16(len(seg))))
		CompleteChecksums(got)
		if !bytes.Equal(got, want) {
			t.Errorf("protocol %d: checksum %#04x, want %#04x", proto, binary.BigEndian.Uint16(seg[off:]),
				binary.BigEndian.Uint16(want[HeaderLength+header.IPv4MinimumSize+off:]))
		}
		CompleteChecksums(got)
		if !bytes.Equal(got, want) {
			t.Errorf("protocol %d: a complete checksum changed", proto)
		}
	}
	icmp := eth(ipv4Packet(header.ICMPv4ProtocolNumber, []byte("echo")))
	header.Ethernet(icmp).Encode(&header.EthernetFields{Type: header.IPv4ProtocolNumber})
	for _, b := range [][]byte{icmp, icmp[:40], icmp[:10], nil} {
		before := append([]byte(nil), b...)
		CompleteChecksums(b)
		if !bytes.Equal(b, before) {
			t.Errorf("%d-byte frame changed", len(b))
		}
	}
}

func TestIPv4Segment(t *testing.T) {
	frame := func(ipLen int, edit func(ip header.IPv4)) []byte {
		f := make([]byte, header.EthernetMinimumSize+ipLen)
		header.Ethernet(f).Encode(&header.EthernetFields{Type: header.IPv4ProtocolNumber})
		ip := header.IPv4(f[header.EthernetMinimumSize:])
		ip.Encode(&header.IPv4Fields{TotalLength: 40, Protocol: uint8(header.TCPProtocolNumber), TTL: 64})
		if edit != nil {
			edit(ip)
		}
		return f
	}
	for _, c := range []struct {
		name   string
		f      []byte
		segLen int // -1: not ok
	}{
		{"TCP", frame(40, nil), 20},
		{"padded", frame(46, nil), 20},
		{"short frame", frame(40, nil)[:30], -1},
		{"total past the frame", frame(39, nil), -1},
		{"total under the header", frame(40, func(ip header.IPv4) { ip.SetTotalLength(19) }), -1},
		{"IHL 4", frame(40, func(ip header.IPv4) { ip[0] = 0x44 }), -1},
		{"more fragments", frame(40, func(ip header.IPv4) { ip.SetFlagsFragmentOffset(header.IPv4FlagMoreFragments, 0) }), -1},
		{"later fragment", frame(40, func(ip header.IPv4) { ip.SetFlagsFragmentOffset(0, 8) }), -1},
		{"ARP", func() []byte {
			f := frame(40, nil)
			f[12], f[13] = 0x08, 0x06
			return f
		}(), -1},
	} {
		ip, seg, ok := IPv4Segment(c.f)
		if ok != (c.segLen >= 0) || ok && (len(seg) != c.segLen || len(ip) != len(c.f)-header.EthernetMinimumSize) {
			t.Errorf("%s: ok %v, %d segment bytes; want %d (-1: not ok)", c.name, ok, len(seg), c.segLen)
		}
	}
}
