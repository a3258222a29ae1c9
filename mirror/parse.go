package mirror

import (
	"encoding/binary"
	"math/bits"
)

// Wire-format constants.
const (
	ethHeaderLen    = 14
	vlanTagLen      = 4
	etherTypeIPv4   = 0x0800
	etherType8021Q  = 0x8100
	etherType8021AD = 0x88a8
	maxVLANTags     = 2

	// Link types (pcap LINKTYPE_ numbers, as link/frame names them) and
	// their headers.
	linkTypeNull      = 0 // read as Ethernet, like frame.Frame.LinkType
	linkTypeEthernet  = 1
	linkTypeRaw       = 101
	linkTypeLinuxSLL  = 113
	linkTypeIPv4      = 228
	linkTypeLinuxSLL2 = 276
	sllHeaderLen      = 16 // EtherType at sllProtocolOffset
	sllProtocolOffset = 14
	sll2HeaderLen     = 20 // EtherType at offset 0

	ipv4MinHeaderLen = 20
	ipProtoTCP       = 6
	ipv4FlagMF       = 0x2000
	ipv4FragOffMask  = 0x1fff

	tcpMinHeaderLen = 20
	tcpFlagFIN      = 0x01
	tcpFlagSYN      = 0x02
	tcpFlagRST      = 0x04
)

// onesSum returns the 16-bit ones' complement sum of b (RFC 1071), folded
// but not complemented, as a big-endian value.
func onesSum(b []byte) uint16 {
	return bits.ReverseBytes16(onesSumLE(b, 0))
}

// onesSumLE returns the ones' complement sum of init and of b's little-endian
// 16-bit words (a last odd byte is the low byte of a word), folded. The ones'
// complement sum does not depend on the byte order of its lanes: the sum of
// big-endian words is this one byte-swapped, and 0xffff either way. It adds
// 16-bit lanes in a vector loop where the CPU has one, else 64-bit words with
// end-around carry.
func onesSumLE(b []byte, init uint32) uint16 {
	if s, ok := vectorOnesSum(b, init); ok {
		return s
	}
	return scalarOnesSum(b, init)
}

// scalarOnesSum is onesSumLE without a vector loop.
func scalarOnesSum(b []byte, init uint32) uint16 {
	s, c := uint64(init), uint64(0)
	for len(b) >= 64 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[16:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[24:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[32:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[40:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[48:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[56:]), c)
		b = b[64:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	var tail uint64
	for i, x := range b {
		tail |= uint64(x) << (8 * i)
	}
	s, c = bits.Add64(s, tail, c)
	s, c = bits.Add64(s, c, 0)
	s += c
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return uint16(s)
}

// ipv4HeaderSumOK reports whether the IPv4 header h sums to 0xffff, as a
// header with a correct checksum does. h is the whole header (IHL*4 bytes,
// at least 20). As 2^16 is 1 modulo 0xffff, the plain sum of its 32-bit words
// is congruent to the ones' complement sum of its 16-bit words, which folds to
// 0xffff exactly when it is a non-zero multiple of 0xffff (in either byte
// order; 15 words cannot overflow). A division by a constant is cheaper than
// the chain of folds. The common 20-byte header takes five loads in a
// straight line; options add one turn of the loop per word. HandleFrame's
// straight path and ipv4 call it for every segment, so it must stay within the
// compiler's inlining budget (TestHotHelpersInline).
func ipv4HeaderSumOK(h []byte) bool {
	w := (*[ipv4MinHeaderLen]byte)(h)
	s := uint64(binary.LittleEndian.Uint32(w[0:])) + uint64(binary.LittleEndian.Uint32(w[4:])) +
		uint64(binary.LittleEndian.Uint32(w[8:])) + uint64(binary.LittleEndian.Uint32(w[12:])) +
		uint64(binary.LittleEndian.Uint32(w[16:]))
	for o := h[ipv4MinHeaderLen:]; len(o) >= 4; o = o[4:] {
		s += uint64(binary.LittleEndian.Uint32(o))
	}
	return s%0xffff == 0 && s != 0
}

// addOnes adds two 16-bit ones' complement sums.
func addOnes(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s>>16 + s&0xffff)
}

// pseudoSum returns the ones' complement sum of the TCP pseudo-header.
func pseudoSum(src, dst []byte, tcpLen int) uint16 {
	s := uint32(binary.BigEndian.Uint16(src)) + uint32(binary.BigEndian.Uint16(src[2:])) +
		uint32(binary.BigEndian.Uint16(dst)) + uint32(binary.BigEndian.Uint16(dst[2:])) +
		ipProtoTCP + uint32(tcpLen)
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}

// checksumState is the outcome of checking one segment's TCP checksum.
type checksumState uint8

const (
	checksumGood checksumState = iota
	// checksumOffloadLike: bad, but the field holds what an offloading
	// sender leaves there.
	checksumOffloadLike
	checksumBad
	checksumUnchecked
)

// tcpChecksum checks the TCP checksum of the segment that follows the
// ihl-byte IPv4 header of pkt. The common case, a good checksum under a
// header without options, costs one call to the vector loop.
func tcpChecksum(pkt []byte, ihl int) checksumState {
	if ihl == ipv4MinHeaderLen {
		if s, ok := vectorOnesSum(pkt[12:], tcpPseudoConst(len(pkt)-ipv4MinHeaderLen)); ok && s == 0xffff {
			return checksumGood
		}
	}
	return tcpChecksumOther(pkt, ihl)
}

// tcpPseudoConst returns the part of the TCP pseudo-header sum that is not
// the addresses, for a segment of segLen bytes, byte-swapped for a sum of
// little-endian words.
func tcpPseudoConst(segLen int) uint32 {
	return uint32(bits.ReverseBytes16(ipProtoTCP + uint16(segLen)))
}

// tcpChecksumOther is tcpChecksum for the segments its single vector sum
// does not settle: a header with options, a segment too short for the
// vector loop, no vector loop, or a sum other than 0xffff.
func tcpChecksumOther(pkt []byte, ihl int) checksumState {
	seg := pkt[ihl:]
	var sum uint16
	if ihl == ipv4MinHeaderLen {
		// Without IPv4 options the addresses end where the segment
		// starts: one pass sums both, the rest of the pseudo-header is
		// two constants.
		sum = onesSumLE(pkt[12:], tcpPseudoConst(len(seg)))
	} else {
		sum = addOnes(pseudoSum(pkt[12:16], pkt[16:20], len(seg)), onesSum(seg))
	}
	if sum == 0xffff {
		return checksumGood
	}
	p := pseudoSum(pkt[12:16], pkt[16:20], len(seg))
	field := binary.BigEndian.Uint16(seg[16:])
	if field == 0 || field == p || field == ^p {
		return checksumOffloadLike
	}
	return checksumBad
}
