package nicsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/tickwire/tickwire/link/dmaring"
)

// Hash types, as bits of the completion's rx_hash_type byte: the
// completion format's, defined by dmaring (dmaring.HashTypeIPv4 and the
// others, where their encoding is explained).
const (
	HashTypeIPv4 = dmaring.HashTypeIPv4
	HashTypeIPv6 = dmaring.HashTypeIPv6
	HashTypeTCP  = dmaring.HashTypeTCP
	HashTypeUDP  = dmaring.HashTypeUDP
)

// RSSKeySize is the length of a Toeplitz RSS key in bytes: 320 bits, enough
// for the 36-byte IPv6 4-tuple.
const RSSKeySize = 40

// DefaultRSSTableSize is the indirection table length that RSSConfig gets
// when it names none: 256 entries, the largest table Corundum builds
// (RX_INDIR_TBL_ADDR_WIDTH is at most 8).
const DefaultRSSTableSize = 256

// MaxRSSTableSize bounds the indirection table length.
const MaxRSSTableSize = 4096

// DefaultRSSKey is the key of Microsoft's "Verifying the RSS Hash Calculation"
// page, also the key Corundum's mqnic_ingress.v wires into rx_hash.
var DefaultRSSKey = [RSSKeySize]byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2,
	0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4,
	0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// ErrRSSConfig is the error NewRSS wraps when it rejects an RSSConfig; the
// wrapping error says which field is wrong.
var ErrRSSConfig = errors.New("nicsim: invalid RSS configuration")

// Toeplitz returns the Toeplitz hash of input under key, as Microsoft's RSS
// specification defines it: for every bit of input, most significant bit of
// input[0] first, a set bit XORs the 32 key bits starting at the same bit
// position into the result.
//
// The definition needs len(key) >= len(input)+4; key bits past the end of a
// shorter key count as zero. Toeplitz does not allocate. For many frames
// under one key, RSS.Classify is faster: it hashes with per-key tables.
func Toeplitz(key []byte, input []byte) uint32 {
	// w holds the 64 key bits starting at bit 8*i, the first of them in
	// w's most significant bit.
	var w uint64
	for j := 0; j < 8; j++ {
		w = w<<8 | uint64(keyByte(key, j))
	}
	var h uint32
	for i, b := range input {
		for j := 0; j < 8; j++ {
			if b&(0x80>>j) != 0 {
				h ^= uint32(w >> (32 - j))
			}
		}
		w = w<<8 | uint64(keyByte(key, i+8))
	}
	return h
}

// keyByte returns key[i], or 0 past the end of key.
func keyByte(key []byte, i int) byte {
	if i < len(key) {
		return key[i]
	}
	return 0
}

// RSSConfig configures receive-side scaling.
type RSSConfig struct {
	// Key is the Toeplitz key. The zero value selects DefaultRSSKey.
	Key [RSSKeySize]byte

	// Table is the indirection table: a hashed frame goes to queue
	// Table[hash & (len(Table)-1)], as in Corundum's RX queue map with the
	// RSS mask set to the table size minus one. Its length must be a power
	// of two no larger than MaxRSSTableSize, and every entry must be below
	// Queues. Nil selects DefaultRSSTableSize entries with entry i set to
	// i mod Queues, the default Linux drivers (mqnic included) load.
	// NewRSS copies the table.
	Table []uint16

	// Queues is the number of RX queues, from 1 to 65536.
	Queues int
}

// tupleLen is the length of the IPv4 4-tuple input: source address,
// destination address, source port, destination port.
const tupleLen = 12

// RSS classifies received frames into RX queues by a Toeplitz hash of their
// IPv4 addresses and TCP or UDP ports. An RSS is immutable once NewRSS returns
// it and is safe for concurrent use; to change the key or the table, build a
// new one and swap the pointer.
type RSS struct {
	key   [RSSKeySize]byte
	table []uint16
	mask  uint32

	// lut[i][v] is the Toeplitz contribution of byte value v at position
	// i of the 4-tuple under key, so that hashing a frame costs 12 table
	// reads instead of 96 conditional XORs.
	lut [tupleLen][256]uint32
}

// NewRSS validates c and returns an RSS for it. An invalid configuration
// gives an error that wraps ErrRSSConfig.
func NewRSS(c RSSConfig) (*RSS, error) {
	if c.Queues < 1 || c.Queues > 1<<16 {
		return nil, fmt.Errorf("%w: Queues is %d, want 1 to 65536", ErrRSSConfig, c.Queues)
	}
	r := &RSS{key: c.Key}
	if r.key == ([RSSKeySize]byte{}) {
		r.key = DefaultRSSKey
	}
	if c.Table == nil {
		r.table = make([]uint16, DefaultRSSTableSize)
		for i := range r.table {
			r.table[i] = uint16(i % c.Queues)
		}
	} else {
		n := len(c.Table)
		if n == 0 || n > MaxRSSTableSize || n&(n-1) != 0 {
			return nil, fmt.Errorf("%w: indirection table has %d entries, want a power of two from 1 to %d",
				ErrRSSConfig, n, MaxRSSTableSize)
		}
		for i, q := range c.Table {
			if int(q) >= c.Queues {
				return nil, fmt.Errorf("%w: indirection table entry %d is queue %d, but there are %d queues",
					ErrRSSConfig, i, q, c.Queues)
			}
		}
		r.table = append([]uint16(nil), c.Table...)
	}
	r.mask = uint32(len(r.table) - 1)
	for i := range r.lut {
		// bit[j] is the contribution of bit j (0 = most significant) of
		// byte i: the 32 key bits from bit 8*i+j.
		var bit [8]uint32
		for j := range bit {
			var in [tupleLen]byte
			in[i] = 0x80 >> j
			bit[j] = Toeplitz(r.key[:], in[:])
		}
		for v := 1; v < 256; v++ {
			// v is v with its lowest set bit cleared, plus that bit.
			r.lut[i][v] = r.lut[i][v&(v-1)] ^ bit[7-bits.TrailingZeros(uint(v))]
		}
	}
	return r, nil
}

// Key returns the Toeplitz key.
func (r *RSS) Key() [RSSKeySize]byte { return r.key }

// Table returns a copy of the indirection table.
func (r *RSS) Table() []uint16 { return append([]uint16(nil), r.table...) }

// Ethernet and IPv4 constants Classify needs.
const (
	ethHeaderLen     = 14
	ethTypeOffset    = 12
	vlanTagLen       = 4
	etherTypeIPv4    = 0x0800
	etherTypeVLAN    = 0x8100
	ipv4MinHeaderLen = 20
	ipv4FlagsOffset  = 6
	ipv4ProtoOffset  = 9
	ipv4SrcOffset    = 12
	ipv4FragMask     = 0x3fff // the more-fragments flag and the offset
	protoTCP         = 6
	protoUDP         = 17
)

// Classify hashes frame, an Ethernet II frame without FCS, and picks its RX
// queue. It reads, without copying or allocating:
//
//   - an IPv4 packet (EtherType 0x0800, optionally behind one 802.1Q tag)
//     whose header is complete (version 4, IHL at least 5, all IHL*4 bytes
//     in frame): the hash covers source and destination address;
//     hashType is HashTypeIPv4;
//   - if that packet is TCP or UDP, not a fragment (more-fragments flag
//     and fragment offset clear), and its first 4 transport bytes are in
//     frame: the hash also covers source and destination port, in that
//     order after the addresses (Microsoft's 12-byte input); hashType adds
//     HashTypeTCP or HashTypeUDP.
//
// The queue is Table[hash & (len(Table)-1)]. Any other frame, short or
// garbled ones included, gives hash 0, hashType 0 and queue 0. Classify
// never panics, whatever frame holds.
//
// Where this differs from Corundum's rx_hash.v, and why:
//   - rx_hash.v reads no 802.1Q tag; nicsim skips one, because host stacks
//     send tagged frames and a tag should not move a flow to another queue
//     from its untagged peer.
//   - rx_hash.v hashes ports only when IHL is 5 (skipping options is a TODO
//     there); nicsim skips the options, as Microsoft's "RSS Hashing Types"
//     page requires, so a flow whose packets carry options still hashes
//     with its ports.
//   - rx_hash.v hashes the ports of IPv4 fragments too, which puts the
//     first fragment of a datagram on another queue than the rest; nicsim
//     hashes every fragment, the first included, by addresses only, as the
//     same page requires, so a datagram's fragments share a queue.
//   - Corundum sends an unhashed frame to Table[0]; nicsim sends it to
//     queue 0, whatever Table[0] holds, so non-IP traffic such as ARP has a
//     fixed queue. With the default table the two agree.
func (r *RSS) Classify(frame []byte) (hash uint32, hashType uint32, queue int) {
	if len(frame) < ethHeaderLen {
		return 0, 0, 0
	}
	off := ethHeaderLen
	et := binary.BigEndian.Uint16(frame[ethTypeOffset:])
	if et == etherTypeVLAN {
		if len(frame) < ethHeaderLen+vlanTagLen {
			return 0, 0, 0
		}
		et = binary.BigEndian.Uint16(frame[ethTypeOffset+vlanTagLen:])
		off += vlanTagLen
	}
	if et != etherTypeIPv4 {
		return 0, 0, 0
	}
	ip := frame[off:]
	if len(ip) < ipv4MinHeaderLen || ip[0]>>4 != 4 {
		return 0, 0, 0
	}
	ihl := int(ip[0]&0x0f) * 4
	if ihl < ipv4MinHeaderLen || len(ip) < ihl {
		return 0, 0, 0
	}
	a := ip[ipv4SrcOffset : ipv4SrcOffset+8]
	hash = r.lut[0][a[0]] ^ r.lut[1][a[1]] ^ r.lut[2][a[2]] ^ r.lut[3][a[3]] ^
		r.lut[4][a[4]] ^ r.lut[5][a[5]] ^ r.lut[6][a[6]] ^ r.lut[7][a[7]]
	hashType = HashTypeIPv4
	if binary.BigEndian.Uint16(ip[ipv4FlagsOffset:])&ipv4FragMask == 0 && len(ip) >= ihl+4 {
		switch ip[ipv4ProtoOffset] {
		case protoTCP:
			hashType |= HashTypeTCP
		case protoUDP:
			hashType |= HashTypeUDP
		}
		if hashType != HashTypeIPv4 {
			p := ip[ihl : ihl+4]
			hash ^= r.lut[8][p[0]] ^ r.lut[9][p[1]] ^ r.lut[10][p[2]] ^ r.lut[11][p[3]]
		}
	}
	return hash, hashType, int(r.table[hash&r.mask])
}
