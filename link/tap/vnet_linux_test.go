//go:build linux

package tap

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire/internal/kerneltest"
)

// ipv4Frame builds an Ethernet frame carrying an IPv4 packet of proto whose
// checksums are all right (computed with gVisor's header package).
func ipv4Frame(dst, src net.HardwareAddr, proto tcpip.TransportProtocolNumber, payload []byte) []byte {
	const ipOff = header.EthernetMinimumSize
	segLen := len(payload)
	switch proto {
	case header.TCPProtocolNumber:
		segLen += header.TCPMinimumSize
	case header.UDPProtocolNumber:
		segLen += header.UDPMinimumSize
	}
	f := make([]byte, ipOff+header.IPv4MinimumSize+segLen)
	header.Ethernet(f).Encode(&header.EthernetFields{SrcAddr: tcpip.LinkAddress(src), DstAddr: tcpip.LinkAddress(dst), Type: header.IPv4ProtocolNumber})
	srcIP, dstIP := tcpip.AddrFrom4([4]byte{10, 201, 9, 1}), tcpip.AddrFrom4([4]byte{10, 201, 9, 2})
	ip := header.IPv4(f[ipOff:])
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Flags: header.IPv4FlagDontFragment, Protocol: uint8(proto), SrcAddr: srcIP, DstAddr: dstIP})
	ip.SetChecksum(^ip.CalculateChecksum())
	seg := ip[header.IPv4MinimumSize:]
	sum := header.PseudoHeaderChecksum(proto, srcIP, dstIP, uint16(len(seg)))
	switch proto {
	case header.TCPProtocolNumber:
		copy(seg[header.TCPMinimumSize:], payload)
		tcp := header.TCP(seg)
		tcp.Encode(&header.TCPFields{SrcPort: 40000, DstPort: 7, SeqNum: 1, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagSyn, WindowSize: 1000})
		tcp.SetChecksum(^checksum.Checksum(seg, sum))
	case header.UDPProtocolNumber:
		copy(seg[header.UDPMinimumSize:], payload)
		udp := header.UDP(seg)
		udp.Encode(&header.UDPFields{SrcPort: 40000, DstPort: 7, Length: uint16(len(seg))})
		udp.SetChecksum(^checksum.Checksum(seg, sum))
	}
	return f
}

// TestTxHeaderCompletedLikeTheKernel checks putTxHeader's partial checksum:
// completed as the kernel completes NEEDS_CSUM (the one's complement sum
// from csum_start, stored at csum_start+csum_offset), the segment gets back
// the checksum the stack computed. Other frames go out untouched.
func TestTxHeaderCompletedLikeTheKernel(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, n := range []int{0, 1, 64, 1000, 1459} {
		f := ipv4Frame(mac, mac, header.TCPProtocolNumber, bytes.Repeat([]byte{0xa5, byte(n)}, n/2+n%2)[:n])
		want := header.TCP(f[header.EthernetMinimumSize+header.IPv4MinimumSize:]).Checksum()
		hdr := make([]byte, vnetHdrLen)
		putTxHeader(hdr, f, 0)
		start, off := int(hdr[6])|int(hdr[7])<<8, int(hdr[8])|int(hdr[9])<<8
		if hdr[0] != vnetNeedsCsum || start != header.EthernetMinimumSize+header.IPv4MinimumSize || off != header.TCPChecksumOffset {
			t.Fatalf("payload %d: header % x", n, hdr)
		}
		c := ^checksum.Checksum(f[start:], 0)
		if c != want {
			t.Errorf("payload %d: completed checksum %#04x, stack computed %#04x", n, c, want)
		}
	}
	udp := ipv4Frame(mac, mac, header.UDPProtocolNumber, []byte("datagram"))
	before := append([]byte(nil), udp...)
	hdr := bytes.Repeat([]byte{0xff}, vnetHdrLen)
	putTxHeader(hdr, udp, 1000)
	if !bytes.Equal(hdr, make([]byte, vnetHdrLen)) || !bytes.Equal(udp, before) {
		t.Errorf("UDP frame: header % x, frame changed %v", hdr, !bytes.Equal(udp, before))
	}
}

// TestTxHeaderTSO: a TCP segment longer than the MSS it was built for goes
// as a TSO frame (GSO_TCPV4, gso_size the MSS, hdr_len its headers); one
// within it, or written without an MSS, does not.
func TestTxHeaderTSO(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, c := range []struct {
		payload int
		mss     uint16
		tso     bool
	}{{3000, 1408, true}, {1409, 1408, true}, {1408, 1408, false}, {3000, 0, false}, {0, 1408, false}} {
		f := ipv4Frame(mac, mac, header.TCPProtocolNumber, make([]byte, c.payload))
		hdr := make([]byte, vnetHdrLen)
		putTxHeader(hdr, f, c.mss)
		gsoType, hdrLen, gsoSize := hdr[1], binary.NativeEndian.Uint16(hdr[2:]), binary.NativeEndian.Uint16(hdr[4:])
		switch {
		case hdr[0] != vnetNeedsCsum:
			t.Errorf("payload %d, MSS %d: flags %#x, want NEEDS_CSUM", c.payload, c.mss, hdr[0])
		case c.tso && (gsoType != vnetGSOTCPv4 || gsoSize != c.mss || hdrLen != header.EthernetMinimumSize+header.IPv4MinimumSize+header.TCPMinimumSize):
			t.Errorf("payload %d, MSS %d: header % x, want a TSO segment", c.payload, c.mss, hdr)
		case !c.tso && (gsoType != 0 || gsoSize != 0 || hdrLen != 0):
			t.Errorf("payload %d, MSS %d: header % x, want no TSO", c.payload, c.mss, hdr)
		}
	}
}

func TestCheckFrame(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	good := ipv4Frame(mac, mac, header.TCPProtocolNumber, []byte("abc"))
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	badUDP := ipv4Frame(mac, mac, header.UDPProtocolNumber, []byte("abc"))
	badUDP[len(badUDP)-1] ^= 1
	vnet := func(flags, gso byte) []byte { return []byte{flags, gso, 0, 0, 0, 0, 0, 0, 0, 0} }
	for _, c := range []struct {
		name  string
		hdr   []byte
		frame []byte
		want  rxVerdict
	}{
		{"unflagged, right", vnet(0, 0), good, rxDeliver},
		{"unflagged, TCP wrong", vnet(0, 0), bad, rxBadTCP},
		{"unflagged, UDP wrong", vnet(0, 0), badUDP, rxBadUDP},
		{"partial checksum", vnet(vnetNeedsCsum, 0), bad, rxDeliver},
		{"verified by a device", vnet(vnetDataValid, 0), bad, rxDeliver},
		{"TSO4 segment", vnet(vnetNeedsCsum, vnetGSOTCPv4), good, rxDeliver},
		{"TSO4 segment without a partial checksum", vnet(0, vnetGSOTCPv4), good, rxMalformed},
		{"UDP or IPv6 GSO (never asked for)", vnet(vnetNeedsCsum, 3), good, rxMalformed},
		{"short header", []byte{0}, good, rxMalformed},
		{"ARP", vnet(0, 0), ethernetFrame(mac, mac, make([]byte, header.ARPSize)), rxDeliver},
	} {
		if got := checkFrame(c.hdr, c.frame); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestUnvouchedFramesVerified sends IPv4 frames from a kernel packet socket
// on the device, which the kernel passes on without checksum flags: those
// with a wrong checksum are dropped and counted by kind, the right one is
// delivered.
func TestUnvouchedFramesVerified(t *testing.T) {
	name := kerneltest.Name("twl")
	ns, ep := newNetnsTAP(t, Config{Name: name})
	frames := make(sink, 16)
	ep.Attach(frames)
	defer ep.Attach(nil)
	peer := net.HardwareAddr{2, 1, 1, 1, 1, 1}
	good := ipv4Frame(ep.MAC(), peer, header.TCPProtocolNumber, []byte("hello"))
	badTCP := append([]byte(nil), good...)
	badTCP[len(badTCP)-1] ^= 1
	badIP := append([]byte(nil), good...)
	badIP[header.EthernetMinimumSize+8]-- // TTL
	badUDP := ipv4Frame(ep.MAC(), peer, header.UDPProtocolNumber, []byte("hello"))
	badUDP[len(badUDP)-1] ^= 1
	for _, f := range [][]byte{badTCP, badIP, badUDP, good} {
		sendRaw(t, ns, name, f)
	}
	select {
	case f := <-frames:
		if !bytes.Equal(f, good) {
			t.Fatalf("delivered % x, want the right frame", f)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the frame with right checksums was not delivered")
	}
	st := ep.Stats()
	if st.RxBadTCPChecksum != 1 || st.RxBadIPv4Checksum != 1 || st.RxBadUDPChecksum != 1 || st.RxFrames != 1 {
		t.Fatalf("stats %+v, want one drop of each kind and one frame delivered", st)
	}
	if ipv4, tcp, udp, icmp := ep.RxChecksumDrops(); ipv4 != 1 || tcp != 1 || udp != 1 || icmp != 0 {
		t.Fatalf("RxChecksumDrops = %d %d %d %d", ipv4, tcp, udp, icmp)
	}
}

// TestTCPHeadersLen: the headers a large TCP frame's first view holds
// (see read) are Ethernet, IPv4 with options and TCP with options, and
// only for an unfragmented TCP/IPv4 frame that holds them whole.
func TestTCPHeadersLen(t *testing.T) {
	frame := func(ihl, doff int, proto uint8, flagsFrag uint16, etherType uint16) []byte {
		f := make([]byte, header.EthernetMinimumSize+ihl+doff+100)
		f[12], f[13] = byte(etherType>>8), byte(etherType)
		ip := f[header.EthernetMinimumSize:]
		ip[0] = 0x40 | byte(ihl/4)
		ip[6], ip[7] = byte(flagsFrag>>8), byte(flagsFrag)
		ip[9] = proto
		ip[ihl+header.TCPDataOffset] = byte(doff/4) << 4
		return f
	}
	for _, tc := range []struct {
		name string
		f    []byte
		want int
	}{
		{"plain", frame(20, 20, 6, 0, 0x0800), 54},
		{"options", frame(24, 32, 6, 0x4000, 0x0800), 14 + 24 + 32}, // DF set
		{"udp", frame(20, 20, 17, 0, 0x0800), 0},
		{"first fragment", frame(20, 20, 6, 0x2000, 0x0800), 0},
		{"later fragment", frame(20, 20, 6, 0x0010, 0x0800), 0},
		{"arp", frame(20, 20, 6, 0, 0x0806), 0},
		{"truncated", frame(20, 20, 6, 0, 0x0800)[:30], 0},
		{"short tcp", frame(20, 60, 6, 0, 0x0800)[:14+20+40], 0},
		{"bad data offset", frame(20, 16, 6, 0, 0x0800), 0},
	} {
		if got := tcpHeadersLen(tc.f); got != tc.want {
			t.Errorf("%s: tcpHeadersLen = %d, want %d", tc.name, got, tc.want)
		}
	}
}
