// Package captest converts captures between link types for the tests of
// the packages that decode them (mirror, examples/mirrorfeed): the same
// traffic recorded as Ethernet, Linux cooked (SLL, SLL2) or raw IP must
// decode the same. mirror's tests check its output against tshark.
package captest

import (
	"encoding/binary"

	"github.com/tickwire/tickwire/link/frame"
)

// FromEthernet rewrites an Ethernet frame as a frame of link type link, as
// the capturing host would have recorded it: a Linux cooked header (SLL or
// SLL2, received from the frame's source MAC on interface 1) in place of the
// Ethernet header, VLAN tags kept after it as libpcap reinserts them; or,
// for raw IP, the IP packet without its link header, tags or padding. It
// reports false for a frame the link type cannot carry (too short, not IP,
// not IPv4 for LINKTYPE_IPV4, a version that disagrees with the EtherType
// for LINKTYPE_RAW).
func FromEthernet(eth []byte, link uint16) ([]byte, bool) {
	if len(eth) < 14 {
		return nil, false
	}
	etherType, rest := binary.BigEndian.Uint16(eth[12:]), eth[14:]
	switch link {
	case frame.LinkTypeLinuxSLL:
		h := make([]byte, 16, 16+len(rest))
		binary.BigEndian.PutUint16(h[0:], 0) // packet type: to us
		binary.BigEndian.PutUint16(h[2:], 1) // ARPHRD_ETHER
		binary.BigEndian.PutUint16(h[4:], 6) // address length
		copy(h[6:14], eth[6:12])             // source MAC, padded to 8
		binary.BigEndian.PutUint16(h[14:], etherType)
		return append(h, rest...), true
	case frame.LinkTypeLinuxSLL2:
		h := make([]byte, 20, 20+len(rest))
		binary.BigEndian.PutUint16(h[0:], etherType)
		binary.BigEndian.PutUint32(h[4:], 1) // interface index
		binary.BigEndian.PutUint16(h[8:], 1) // ARPHRD_ETHER
		h[10] = 0                            // packet type: to us
		h[11] = 6                            // address length
		copy(h[12:20], eth[6:12])
		return append(h, rest...), true
	}
	for tags := 0; (etherType == 0x8100 || etherType == 0x88a8) && tags < 2 && len(rest) >= 4; tags++ {
		etherType, rest = binary.BigEndian.Uint16(rest[2:]), rest[4:]
	}
	switch {
	case etherType == 0x0800 && len(rest) >= 20 && (link == frame.LinkTypeIPv4 || rest[0]>>4 == 4):
		if total := int(binary.BigEndian.Uint16(rest[2:])); total >= 20 && total < len(rest) {
			rest = rest[:total] // Ethernet padding
		}
	case etherType == 0x86dd && link == frame.LinkTypeRaw && len(rest) > 0 && rest[0]>>4 == 6:
	default:
		// LINKTYPE_RAW tells the IP version by the packet's first nibble,
		// so a packet whose nibble disagrees with its EtherType has no
		// raw equivalent.
		return nil, false
	}
	return append([]byte(nil), rest...), true
}
