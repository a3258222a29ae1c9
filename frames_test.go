package tickwire_test

import (
	"net"
	"net/netip"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Hand-made frames for the fake peer. They are built with gVisor's header
// encoders; nothing here goes through a stack.

func ethernet(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	f := make([]byte, header.EthernetMinimumSize+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress(src), DstAddr: tcpip.LinkAddress(dst), Type: tcpip.NetworkProtocolNumber(etherType),
	})
	copy(f[header.EthernetMinimumSize:], payload)
	return f
}

func ipv4Packet(src, dst netip.Addr, proto uint8, payload []byte) []byte {
	p := make([]byte, header.IPv4MinimumSize+len(payload))
	ip := header.IPv4(p)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(p)), TTL: 64, Protocol: proto,
		SrcAddr: tcpip.AddrFrom4(src.As4()), DstAddr: tcpip.AddrFrom4(dst.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	copy(p[header.IPv4MinimumSize:], payload)
	return p
}

func udpDatagram(src, dst netip.AddrPort, payload []byte) []byte {
	u := make([]byte, header.UDPMinimumSize+len(payload))
	h := header.UDP(u)
	h.Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: dst.Port(), Length: uint16(len(u))})
	copy(u[header.UDPMinimumSize:], payload)
	xsum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, tcpip.AddrFrom4(src.Addr().As4()), tcpip.AddrFrom4(dst.Addr().As4()), uint16(len(u)))
	h.SetChecksum(^checksum.Checksum(u, xsum))
	return u
}

func tcpSYN(src, dst netip.AddrPort, seq uint32, mss uint16) []byte {
	t := make([]byte, header.TCPMinimumSize+4)
	h := header.TCP(t)
	h.Encode(&header.TCPFields{
		SrcPort: src.Port(), DstPort: dst.Port(), SeqNum: seq, DataOffset: uint8(len(t)),
		Flags: header.TCPFlagSyn, WindowSize: 65535,
	})
	header.EncodeMSSOption(uint32(mss), t[header.TCPMinimumSize:])
	xsum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom4(src.Addr().As4()), tcpip.AddrFrom4(dst.Addr().As4()), uint16(len(t)))
	h.SetChecksum(^checksum.Checksum(t, xsum))
	return t
}

func arpRequest(srcMAC net.HardwareAddr, srcIP, target netip.Addr) []byte {
	a := make([]byte, header.ARPSize)
	h := header.ARP(a)
	h.SetIPv4OverEthernet()
	h.SetOp(header.ARPRequest)
	copy(h.HardwareAddressSender(), srcMAC)
	copy(h.ProtocolAddressSender(), srcIP.AsSlice())
	copy(h.ProtocolAddressTarget(), target.AsSlice())
	return ethernet(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, srcMAC, uint16(header.ARPProtocolNumber), a)
}

// capture records the frames a pipe end transmits.
type capture struct {
	mu sync.Mutex
	// +checklocks:mu
	frames [][]byte
}

func (c *capture) record(frame []byte) {
	c.mu.Lock()
	c.frames = append(c.frames, append([]byte(nil), frame...))
	c.mu.Unlock()
}

func (c *capture) snapshot() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.frames...)
}

// tcpSegment parses an Ethernet/IPv4/TCP frame; ok is false for anything else.
func tcpSegment(frame []byte) (tcp header.TCP, payloadLen int, ok bool) {
	if len(frame) < header.EthernetMinimumSize+header.IPv4MinimumSize ||
		header.Ethernet(frame).Type() != header.IPv4ProtocolNumber {
		return nil, 0, false
	}
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	if !ip.IsValid(len(ip)) || ip.Protocol() != uint8(header.TCPProtocolNumber) {
		return nil, 0, false
	}
	seg := ip[ip.HeaderLength():ip.TotalLength()]
	if len(seg) < header.TCPMinimumSize || int(header.TCP(seg).DataOffset()) > len(seg) {
		return nil, 0, false
	}
	return header.TCP(seg), len(seg) - int(header.TCP(seg).DataOffset()), true
}
