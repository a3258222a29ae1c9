package dmaring

import (
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// TX checksum command (tx_csum_cmd), as mqnic_tx.c builds it: bit 15
// enables, bits 14:8 the checksum field's offset from the start, bits 7:0
// the start (from the frame's first byte). The device sums from start to the
// end of the frame, seeded with what the field holds (the pseudo-header
// sum), and stores the complement.
const (
	TxCsumEnable   = 0x8000
	TxCsumMaxStart = 255
	TxCsumMaxOff   = 127
)

// txChecksumCommand prepares f, a frame the stack built with the transport
// checksum left to the device (CapabilityTXChecksumOffload), for the
// device: for an IPv4 TCP or UDP packet that is not a fragment, it stores
// the pseudo-header sum in the checksum field and returns the command;
// otherwise 0 (the frame's checksums are complete: ICMP, ARP).
func txChecksumCommand(f []byte) uint16 {
	ip, seg, ok := linkbase.IPv4Segment(f)
	if !ok {
		return 0
	}
	start := header.EthernetMinimumSize + int(ip.HeaderLength())
	var off int
	switch proto := ip.TransportProtocol(); proto {
	case header.TCPProtocolNumber:
		if len(seg) < header.TCPMinimumSize {
			return 0
		}
		off = header.TCPChecksumOffset
	case header.UDPProtocolNumber:
		if len(seg) < header.UDPMinimumSize {
			return 0
		}
		off = udpChecksumOffset
	default:
		return 0
	}
	le := seg[off : off+2]
	s := linkbase.PseudoHeaderSum(ip, ip.TransportProtocol(), len(seg))
	le[0], le[1] = byte(s>>8), byte(s)
	return TxCsumEnable | uint16(off)<<8 | uint16(start)
}

// rxChecksum checks f's IPv4 and transport checksums with csum, the
// device's one's complement sum of everything after the Ethernet header,
// when haveCsum; otherwise (or for a padded frame, whose padding the sum
// covers) it computes them.
func rxChecksum(f []byte, csum uint16, haveCsum bool) linkbase.ChecksumVerdict {
	if len(f) < header.EthernetMinimumSize || header.Ethernet(f).Type() != header.IPv4ProtocolNumber {
		return linkbase.ChecksumOK
	}
	b := f[header.EthernetMinimumSize:]
	if len(b) < header.IPv4MinimumSize {
		return linkbase.ChecksumOK
	}
	ip := header.IPv4(b)
	ihl := int(ip.HeaderLength())
	total := int(ip.TotalLength())
	if !haveCsum || total != len(b) || ihl < header.IPv4MinimumSize || ihl > total {
		return linkbase.VerifyIPv4(b)
	}
	if !ip.IsChecksumValid() {
		return linkbase.BadIPv4Checksum
	}
	if ip.More() || ip.FragmentOffset() != 0 {
		return linkbase.ChecksumOK
	}
	// A valid header sums to 0xffff, one's complement zero: csum is the
	// transport segment's sum.
	seg := ip[ihl:total]
	switch proto := ip.TransportProtocol(); proto {
	case header.TCPProtocolNumber:
		if checksum.Combine(csum, linkbase.PseudoHeaderSum(ip, proto, len(seg))) != 0xffff {
			return linkbase.BadTCPChecksum
		}
	case header.UDPProtocolNumber:
		if len(seg) >= header.UDPMinimumSize && header.UDP(seg).Checksum() != 0 &&
			checksum.Combine(csum, linkbase.PseudoHeaderSum(ip, proto, len(seg))) != 0xffff {
			return linkbase.BadUDPChecksum
		}
	case header.ICMPv4ProtocolNumber:
		if csum != 0xffff {
			return linkbase.BadICMPChecksum
		}
	}
	return linkbase.ChecksumOK
}

// rxVerified reports whether the device's sum csum shows f's IPv4 header
// and TCP or UDP checksums right (frame.Frame.ChecksumVerified): false for
// anything else, which the consumer checks itself. It reads the headers,
// not the payload.
func rxVerified(f []byte, csum uint16, haveCsum bool) bool {
	if !haveCsum || len(f) < header.EthernetMinimumSize+header.IPv4MinimumSize ||
		header.Ethernet(f).Type() != header.IPv4ProtocolNumber {
		return false
	}
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	if ip.More() || ip.FragmentOffset() != 0 || int(ip.TotalLength()) != len(ip) {
		return false
	}
	switch ip.TransportProtocol() {
	case header.TCPProtocolNumber, header.UDPProtocolNumber:
		return rxChecksum(f, csum, true) == linkbase.ChecksumOK
	}
	return false
}

const udpChecksumOffset = 6
