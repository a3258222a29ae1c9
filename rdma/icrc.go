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

// ff supplies the ones of masked fields.
var ff = [4]byte{0xff, 0xff, 0xff, 0xff}

// ICRC returns the invariant CRC of a RoCEv2 packet given its IPv4 header
// ip (20 bytes, no options) and its UDP datagram udp (header and payload,
// without the trailing 4 ICRC bytes). The variant fields are masked as the
// CRC runs: ip and udp are not modified. It allocates nothing.
func ICRC(ip, udp []byte) uint32 { return icrcParts(ip, udp[:8], udp[8:]) }

// icrcParts is ICRC with the UDP header and the transport packet apart.
func icrcParts(ip, udp, transport []byte) uint32 {
	c := crc32.Update(icrcSeed, crc32.IEEETable, ip[:1])
	c = crc32.Update(c, crc32.IEEETable, ff[:1]) // TOS
	c = crc32.Update(c, crc32.IEEETable, ip[2:8])
	c = crc32.Update(c, crc32.IEEETable, ff[:1]) // TTL
	c = crc32.Update(c, crc32.IEEETable, ip[9:10])
	c = crc32.Update(c, crc32.IEEETable, ff[:2]) // header checksum
	c = crc32.Update(c, crc32.IEEETable, ip[12:20])
	c = crc32.Update(c, crc32.IEEETable, udp[:6])
	c = crc32.Update(c, crc32.IEEETable, ff[:2]) // UDP checksum
	c = crc32.Update(c, crc32.IEEETable, transport[:BTHResv8aOffset])
	c = crc32.Update(c, crc32.IEEETable, ff[:1]) // FECN, BECN, reserved
	return crc32.Update(c, crc32.IEEETable, transport[BTHResv8aOffset+1:])
}

// IPv4 header fields this package's own datagrams carry, which the ICRC
// of what it sends covers: "don't fragment" and identification 0, what
// tickwire sends for a datagram that fits the MTU. A received datagram's
// ICRC is checked with its own (tickwire.UDPConn.RxIPv4ID; a NIC numbers
// its datagrams), these only when the stack does not know them.
const (
	assumedIPID    = 0
	assumedIPFlags = 0x4000 // DF
)

// icrcFor computes the ICRC of transport (BTH to the end of the payload
// and pad, without ICRC) carried in a UDP datagram from src to dst, as
// this package's IPv4 header reconstruction has it (see assumedIPID). h is
// scratch space, its contents overwritten: the caller owns it, so that
// nothing is allocated. The masked headers are built whole in h, so that
// the CRC runs in two calls (twelve small ones cost twice as much).
func icrcFor(h *[icrcScratch]byte, src, dst netip.AddrPort, transport []byte) uint32 {
	return icrcForIP(h, src, dst, assumedIPID, assumedIPFlags, transport)
}

// icrcForIP is icrcFor with the IPv4 identification and flags word of the
// datagram's header.
func icrcForIP(h *[icrcScratch]byte, src, dst netip.AddrPort, id, flags uint16, transport []byte) uint32 {
	udpLen := 8 + len(transport) + ICRCSize
	h[0], h[1] = 0x45, 0xff // TOS masked
	binary.BigEndian.PutUint16(h[2:], uint16(20+udpLen))
	binary.BigEndian.PutUint16(h[4:], id)
	binary.BigEndian.PutUint16(h[6:], flags)
	h[8], h[9], h[10], h[11] = 0xff, 17, 0xff, 0xff // TTL, protocol, checksum masked
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(h[12:16], s[:])
	copy(h[16:20], d[:])
	binary.BigEndian.PutUint16(h[20:], src.Port())
	binary.BigEndian.PutUint16(h[22:], dst.Port())
	binary.BigEndian.PutUint16(h[24:], uint16(udpLen))
	h[26], h[27] = 0xff, 0xff // UDP checksum masked
	copy(h[28:], transport[:BTHSize])
	h[28+BTHResv8aOffset] = 0xff
	c := crc32.Update(icrcSeed, crc32.IEEETable, h[:])
	return crc32.Update(c, crc32.IEEETable, transport[BTHSize:])
}

// icrcScratch is icrcFor's scratch size: IPv4, UDP and BTH headers.
const icrcScratch = 20 + 8 + BTHSize
