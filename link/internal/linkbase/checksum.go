package linkbase

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// A link that reports stack.CapabilityRXChecksumOffload tells netstack to
// verify no checksum of the frames it delivers. link/tap does, because the
// kernel vouches for most frames; the frames nobody vouched for it checks
// with VerifyIPv4, and so does a wrapper that injects frames of its own
// above such a link (link/pcap/recorder).

// ChecksumVerdict is what VerifyIPv4 found.
type ChecksumVerdict int

// The verdicts: all checksums right (or nothing to check), or the first
// one found wrong.
const (
	ChecksumOK ChecksumVerdict = iota
	BadIPv4Checksum
	BadTCPChecksum
	BadUDPChecksum
	BadICMPChecksum
)

// VerifyIPv4 checks the checksums of ip, an IPv4 packet: its header's, and
// the TCP, UDP (unless zero: none sent) or ICMP checksum of a packet that is
// not a fragment. A packet too malformed to have checksums passes: the
// stack drops and counts it. A fragment's transport checksum cannot be
// checked before reassembly.
func VerifyIPv4(b []byte) ChecksumVerdict {
	if len(b) < header.IPv4MinimumSize {
		return ChecksumOK
	}
	ip := header.IPv4(b)
	ihl := int(ip.HeaderLength())
	if ihl < header.IPv4MinimumSize || ihl > len(ip) {
		return ChecksumOK
	}
	if !ip.IsChecksumValid() {
		return BadIPv4Checksum
	}
	total := int(ip.TotalLength())
	if total < ihl || total > len(ip) || ip.More() || ip.FragmentOffset() != 0 {
		return ChecksumOK
	}
	seg := ip[ihl:total]
	switch proto := ip.TransportProtocol(); proto {
	case header.TCPProtocolNumber:
		if checksum.Checksum(seg, PseudoHeaderSum(ip, proto, len(seg))) != 0xffff {
			return BadTCPChecksum
		}
	case header.UDPProtocolNumber:
		if len(seg) >= header.UDPMinimumSize && header.UDP(seg).Checksum() != 0 &&
			checksum.Checksum(seg, PseudoHeaderSum(ip, proto, len(seg))) != 0xffff {
			return BadUDPChecksum
		}
	case header.ICMPv4ProtocolNumber:
		if checksum.Checksum(seg, 0) != 0xffff {
			return BadICMPChecksum
		}
	}
	return ChecksumOK
}

// PseudoHeaderSum is header.PseudoHeaderChecksum for an IPv4 header, read in
// place: the folded sum of the addresses, protocol and transport length
// (the library's version builds two tcpip.Address values).
func PseudoHeaderSum(ip header.IPv4, proto tcpip.TransportProtocolNumber, length int) uint16 {
	s := uint32(proto) + uint32(length) +
		uint32(binary.BigEndian.Uint16(ip[12:])) + uint32(binary.BigEndian.Uint16(ip[14:])) +
		uint32(binary.BigEndian.Uint16(ip[16:])) + uint32(binary.BigEndian.Uint16(ip[18:]))
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return uint16(s)
}

// CompleteChecksums turns the partial TCP or UDP checksum (pseudo-header
// sum only) of f, an Ethernet frame, into a full one, as a NIC does before
// the frame reaches the wire: the kernel leaves such sums in frames it
// sends to a TAP device, and a stack in GSO segments it sends. Frames whose
// checksum is already complete are left alone: completing one yields 0,
// the same value re-summed.
func CompleteChecksums(f []byte) {
	ip, seg, ok := IPv4Segment(f)
	if !ok {
		return
	}
	var off int
	switch ip.TransportProtocol() {
	case header.TCPProtocolNumber:
		if len(seg) < header.TCPMinimumSize {
			return
		}
		off = header.TCPChecksumOffset
	case header.UDPProtocolNumber:
		if len(seg) < header.UDPMinimumSize || header.UDP(seg).Checksum() == 0 {
			return
		}
		off = 6
	default:
		return
	}
	pseudo := PseudoHeaderSum(ip, ip.TransportProtocol(), len(seg))
	if checksum.Checksum(seg, pseudo) == 0xffff {
		return // already complete
	}
	// Treat the field as holding the pseudo-header sum: sum the segment
	// with it, store the complement.
	s := ^checksum.Checksum(seg, 0)
	if s == 0 && off == 6 {
		s = 0xffff
	}
	seg[off], seg[off+1] = byte(s>>8), byte(s)
}

// IPv4Segment returns the IPv4 packet in Ethernet frame f and its transport
// segment (header and payload, up to the packet's total length: padding
// after it is left out), when f holds an IPv4 packet whose header lengths
// make sense (IHL at least 5, total length at least the header and within
// the frame) and that is not a fragment; ok is false otherwise. It reads
// the headers only.
func IPv4Segment(f []byte) (ip header.IPv4, seg []byte, ok bool) {
	if len(f) < header.EthernetMinimumSize+header.IPv4MinimumSize ||
		header.Ethernet(f).Type() != header.IPv4ProtocolNumber {
		return nil, nil, false
	}
	ip = header.IPv4(f[header.EthernetMinimumSize:])
	ihl, total := int(ip.HeaderLength()), int(ip.TotalLength())
	if ihl < header.IPv4MinimumSize || total > len(ip) || total < ihl || ip.More() || ip.FragmentOffset() != 0 {
		return nil, nil, false
	}
	return ip, ip[ihl:total], true
}
