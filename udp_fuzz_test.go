package tickwire

import (
	"bytes"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// FuzzParseUDP4 feeds arbitrary IPv4 packets to direct delivery's parser: it
// must not panic, its payload must lie inside the packet, and its verdict
// must agree with gVisor's own header checks (header.IPv4 accessors and
// header.UDPValid) on every packet it does not leave to netstack.
func FuzzParseUDP4(f *testing.F) {
	self := &udpSelf{addr: tcpip.AddrFrom4([4]byte{10, 0, 0, 2}), subnetBroadcast: tcpip.AddrFrom4([4]byte{10, 0, 0, 255})}
	f.Add(fuzzUDPPacket([4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, []byte("hello")), false)
	f.Fuzz(func(t *testing.T, b []byte, checksummed bool) {
		self.checksummed = checksummed
		d, v := parseUDP4(b, self)
		if v == udpPass {
			return
		}
		ip := header.IPv4(b)
		if len(b) < header.IPv4MinimumSize+header.UDPMinimumSize || ip.HeaderLength() != header.IPv4MinimumSize ||
			ip.Protocol() != uint8(header.UDPProtocolNumber) || ip.More() || ip.FragmentOffset() != 0 {
			t.Fatalf("verdict %d on a packet direct delivery must leave to netstack", v)
		}
		total := int(ip.TotalLength())
		if total > len(b) {
			t.Fatalf("verdict %d with total length %d beyond the %d bytes", v, total, len(b))
		}
		if dst := ip.DestinationAddress(); dst != self.addr && dst != header.IPv4Broadcast && dst != self.subnetBroadcast {
			t.Fatalf("verdict %d for destination %v", v, dst)
		}
		u := header.UDP(b[header.IPv4MinimumSize:total])
		if d.srcPort != u.SourcePort() || d.dstPort != u.DestinationPort() || d.src != ip.SourceAddress() || d.dst != ip.DestinationAddress() {
			t.Fatalf("addresses %+v differ from the header's", d)
		}
		payloadLen := uint16(len(u) - header.UDPMinimumSize)
		var payloadSum uint16
		if int(u.Length()) >= header.UDPMinimumSize && int(u.Length()) <= len(u) {
			payloadSum = checksum.Checksum(u[header.UDPMinimumSize:u.Length()], 0)
			payloadLen = u.Length() - header.UDPMinimumSize
		}
		lengthOK, sumOK := header.UDPValid(u, func() uint16 { return payloadSum }, payloadLen, header.IPv4ProtocolNumber, d.src, d.dst, checksummed)
		if int(u.Length()) > len(u) {
			lengthOK = false // UDPValid is given the length the header claims
		}
		switch {
		case !lengthOK:
			if v != udpMalformed {
				t.Fatalf("verdict %d, want malformed (length %d, %d bytes)", v, u.Length(), len(u))
			}
		case !sumOK:
			if v != udpBadChecksum {
				t.Fatalf("verdict %d, want bad checksum", v)
			}
		default:
			if v != udpDeliver {
				t.Fatalf("verdict %d, want deliver", v)
			}
			if want := u[header.UDPMinimumSize:u.Length()]; !bytes.Equal(d.payload, want) || (len(want) > 0 && &d.payload[0] != &want[0]) {
				t.Fatalf("payload %x, want %x aliasing the packet", d.payload, want)
			}
		}
	})
}

// fuzzUDPPacket builds a valid IPv4/UDP packet from port 5555 to port 7.
func fuzzUDPPacket(src, dst [4]byte, payload []byte) []byte {
	b := make([]byte, header.IPv4MinimumSize+header.UDPMinimumSize+len(payload))
	ip := header.IPv4(b)
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(b)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(src), DstAddr: tcpip.AddrFrom4(dst)})
	ip.SetChecksum(^ip.CalculateChecksum())
	u := header.UDP(b[header.IPv4MinimumSize:])
	u.Encode(&header.UDPFields{SrcPort: 5555, DstPort: 7, Length: uint16(len(u))})
	copy(u[header.UDPMinimumSize:], payload)
	sum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, tcpip.AddrFrom4(src), tcpip.AddrFrom4(dst), uint16(len(u)))
	u.SetChecksum(^checksum.Checksum(u, sum))
	return b
}

// TestParseUDP4Verdicts checks the parser's verdict on one packet per rule.
func TestParseUDP4Verdicts(t *testing.T) {
	self := &udpSelf{addr: tcpip.AddrFrom4([4]byte{10, 0, 0, 2}), subnetBroadcast: tcpip.AddrFrom4([4]byte{10, 0, 0, 255})}
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	refreshIP := func(p []byte) {
		ip := header.IPv4(p)
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
	}
	for _, tc := range []struct {
		name        string
		src, dst    [4]byte
		edit        func(p []byte)
		checksummed bool
		want        udpVerdict
		payload     string
	}{
		{name: "valid", src: a, dst: b, want: udpDeliver, payload: "hello"},
		{name: "zero checksum", src: a, dst: b, edit: func(p []byte) { p[26], p[27] = 0, 0 }, want: udpDeliver, payload: "hello"},
		{name: "limited broadcast", src: a, dst: [4]byte{255, 255, 255, 255}, want: udpDeliver, payload: "hello"},
		{name: "subnet broadcast", src: a, dst: [4]byte{10, 0, 0, 255}, want: udpDeliver, payload: "hello"},
		{name: "padding after the datagram", src: a, dst: b, edit: func(p []byte) { p[25] -= 2; p[26], p[27] = 0, 0 }, want: udpDeliver, payload: "hel"},
		{name: "bad checksum", src: a, dst: b, edit: func(p []byte) { p[26] ^= 1 }, want: udpBadChecksum},
		{name: "bad checksum, offloaded", src: a, dst: b, edit: func(p []byte) { p[26] ^= 1 }, checksummed: true, want: udpDeliver, payload: "hello"},
		{name: "UDP length beyond the packet", src: a, dst: b, edit: func(p []byte) { p[25]++ }, want: udpMalformed},
		{name: "UDP length below 8", src: a, dst: b, edit: func(p []byte) { p[24], p[25] = 0, 7 }, want: udpMalformed},
		{name: "not for us", src: a, dst: [4]byte{10, 0, 0, 3}, want: udpPass},
		{name: "from ourselves", src: b, dst: b, want: udpPass},
		{name: "from loopback", src: [4]byte{127, 0, 0, 1}, dst: b, want: udpPass},
		{name: "from multicast", src: [4]byte{224, 0, 0, 1}, dst: b, want: udpPass},
		{name: "from broadcast", src: [4]byte{10, 0, 0, 255}, dst: b, want: udpPass},
		{name: "IP options", src: a, dst: b, edit: func(p []byte) { p[0] = 0x46; refreshIP(p) }, want: udpPass},
		{name: "more fragments", src: a, dst: b, edit: func(p []byte) { p[6] = 0x20; refreshIP(p) }, want: udpPass},
		{name: "fragment offset", src: a, dst: b, edit: func(p []byte) { p[7] = 1; refreshIP(p) }, want: udpPass},
		{name: "DF set", src: a, dst: b, edit: func(p []byte) { p[6] = 0x40; refreshIP(p) }, want: udpDeliver, payload: "hello"},
		{name: "TCP", src: a, dst: b, edit: func(p []byte) { p[9] = 6; refreshIP(p) }, want: udpPass},
		{name: "total length beyond the bytes", src: a, dst: b, edit: func(p []byte) { p[3]++; refreshIP(p) }, want: udpPass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fuzzUDPPacket(tc.src, tc.dst, []byte("hello"))
			if tc.edit != nil {
				tc.edit(p)
			}
			self.checksummed = tc.checksummed
			d, v := parseUDP4(p, self)
			if v != tc.want || string(d.payload) != tc.payload {
				t.Fatalf("verdict %d, payload %q; want %d, %q", v, d.payload, tc.want, tc.payload)
			}
			if v != udpPass && (d.srcPort != 5555 || d.dstPort != 7) {
				t.Fatalf("ports %d -> %d", d.srcPort, d.dstPort)
			}
		})
	}
}
