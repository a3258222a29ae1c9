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

// FinishTCPChecksum completes, in place, the TCP checksum of ip, an IPv4
// packet built for segmentation offload, whose checksum field holds only
// the pseudo-header's sum (CHECKSUM_PARTIAL): what a NIC does before the
// segment leaves. A packet that is not whole, unfragmented TCP is left as
// it is.
func FinishTCPChecksum(ip []byte) {
	if len(ip) < header.IPv4MinimumSize {
		return
	}
	h := header.IPv4(ip)
	ihl, total := int(h.HeaderLength()), int(h.TotalLength())
	if h.TransportProtocol() != header.TCPProtocolNumber || ihl < header.IPv4MinimumSize ||
		total < ihl+header.TCPMinimumSize || total > len(ip) || h.More() || h.FragmentOffset() != 0 {
		return
	}
	seg := header.TCP(ip[ihl:total])
	seg.SetChecksum(^checksum.Checksum(seg, 0))
}
