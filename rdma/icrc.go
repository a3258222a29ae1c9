package rdma

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// The invariant CRC (Annex A17.3.3): CRC-32 (the IEEE polynomial, as
// Ethernet's FCS) over 8 bytes of 0xff standing in for the LRH RoCEv2 does
// not have, then the IPv4 header, the UDP header, the BTH and everything
// after it up to the ICRC, with the fields that routers may change masked
// to ones: the IPv4 TOS (DSCP and ECN), TTL and header checksum, the UDP
// checksum and the BTH's resv8a byte (FECN, BECN). The CRC goes on the
// wire least significant byte first, as Ethernet's FCS does (so a packet's
// last four bytes, read big-endian, are the byte-swapped CRC).

// icrcSeed is the CRC of the 8 bytes of masked LRH: ICRC continues from it.
var icrcSeed = crc32.ChecksumIEEE([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// ICRC returns the invariant CRC of a RoCEv2 packet given its IPv4 header
// ip (20 bytes, no options) and its UDP datagram udp (header and payload,
// without the trailing 4 ICRC bytes). It masks the variant fields in a
// copy and leaves ip and udp unchanged. It allocates nothing.
func ICRC(ip, udp []byte) uint32 {
	var h [20 + 8 + BTHSize]byte
	copy(h[:20], ip)
	copy(h[20:], udp[:8+BTHSize])
	return icrcMasked(&h, udp[8+BTHSize:])
}

// icrcMasked masks the variant fields of h (IPv4, UDP and BTH headers)
// and returns the CRC of the masked LRH, h and rest.
func icrcMasked(h *[20 + 8 + BTHSize]byte, rest []byte) uint32 {
	h[1] = 0xff                   // TOS
	h[8] = 0xff                   // TTL
	h[10], h[11] = 0xff, 0xff     // header checksum
	h[20+6], h[20+7] = 0xff, 0xff // UDP checksum
	h[28+BTHResv8aOffset] = 0xff  // FECN, BECN, reserved
	c := crc32.Update(icrcSeed, crc32.IEEETable, h[:])
	return crc32.Update(c, crc32.IEEETable, rest)
}

// IPv4 header flags this package assumes of a peer's datagrams (see
// DESIGN.md): "don't fragment" and identification 0, what tickwire sends
// for a datagram that fits the MTU and Linux for a DF datagram from an
// unconnected socket.
const (
	assumedIPID    = 0
	assumedIPFlags = 0x4000 // DF
)

// icrcFor computes the ICRC of transport (BTH to the end of the payload
// and pad, without ICRC) carried in a UDP datagram from src to dst, as
// this package's IPv4 header reconstruction has it (see assumedIPID).
func icrcFor(src, dst netip.AddrPort, transport []byte) uint32 {
	var h [20 + 8 + BTHSize]byte
	udpLen := 8 + len(transport) + ICRCSize
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+udpLen))
	binary.BigEndian.PutUint16(h[4:], assumedIPID)
	binary.BigEndian.PutUint16(h[6:], assumedIPFlags)
	h[9] = 17
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(h[12:16], s[:])
	copy(h[16:20], d[:])
	binary.BigEndian.PutUint16(h[20:], src.Port())
	binary.BigEndian.PutUint16(h[22:], dst.Port())
	binary.BigEndian.PutUint16(h[24:], uint16(udpLen))
	copy(h[28:], transport[:BTHSize])
	return icrcMasked(&h, transport[BTHSize:])
}
