// Package udpcap turns captured frames into UDP datagrams, so that a
// capture of a multicast feed (a pcap file, a mirror port, AF_PACKET) is
// decoded exactly like live traffic: each datagram comes out with its
// addresses, its payload, its capture timestamp and the stream, a
// (group, port) pair and optionally a source, that it belongs to.
//
//	d, err := udpcap.New(udpcap.Config{Streams: []udpcap.Stream{
//		{Group: netip.MustParseAddr("239.1.1.1"), Port: 5000},
//		{Group: netip.MustParseAddr("239.1.1.2"), Port: 5000},
//	}})
//	...
//	err = d.Run(src, frame.NewBatch(64, 2048), func(dg *udpcap.Datagram) {
//		arbiter.Datagram(dg.Stream, dg.Payload, dg.Time)
//	})
//
// It decodes IPv4 over Ethernet (with or without one 802.1Q or 802.1ad tag),
// Linux cooked captures (SLL and SLL2) and raw IPv4: the link types of
// link/frame. IPv4 fragments are not reassembled: they are counted in
// Stats.Fragments and skipped (market-data datagrams fit one frame; a feed
// that fragments loses the datagram). Everything else a Decoder skips is
// counted in Stats by reason; nothing is dropped silently, and a Decoder
// never panics on its input, whatever the bytes.
//
// A Decoder keeps no state between frames besides its counters, holds no
// packet memory, and does not allocate per frame. It depends on link/frame
// only.
package udpcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/tickwire/tickwire/link/frame"
)

// MaxStreams is the most streams a Decoder matches; each datagram is
// compared with them in order.
const MaxStreams = 256

// Stream selects the datagrams sent to Group:Port, and when Source is
// valid only those sent from Source (any source port).
type Stream struct {
	Group  netip.Addr // an IPv4 address, usually a multicast group
	Port   uint16     // destination port
	Source netip.Addr // zero value: any source
}

// String formats the stream as GROUP:PORT or GROUP:PORT@SOURCE.
func (s Stream) String() string {
	a := netip.AddrPortFrom(s.Group, s.Port).String()
	if s.Source.IsValid() {
		a += "@" + s.Source.String()
	}
	return a
}

// Config configures a Decoder.
type Config struct {
	// Streams lists the streams to return; a datagram belongs to the first
	// one that matches. With no streams every UDP datagram is returned,
	// with Datagram.Stream -1. At most MaxStreams.
	Streams []Stream
	// Checksums, when set, verifies the IPv4 header checksum and the UDP
	// checksum (when the sender set one) and skips datagrams that fail,
	// counting them in Stats.BadChecksum. Leave it off for captures taken
	// on the sending host, whose checksums the NIC fills in later.
	Checksums bool
}

// Datagram is one UDP datagram of a captured frame.
type Datagram struct {
	// Stream is the index in Config.Streams of the stream the datagram
	// belongs to, or -1 when Config.Streams is empty.
	Stream int
	// Src and Dst are the IPv4 addresses and UDP ports.
	Src, Dst netip.AddrPort
	// Payload is the UDP payload. It aliases the frame: it is valid as
	// long as the frame's bytes are (for Run, until the callback returns).
	Payload []byte
	// Time is the capture time, nanoseconds since the Unix epoch (0 when
	// the source does not know it).
	Time int64
}

// Stats counts the frames a Decoder has seen, by what became of them.
// Frames = Datagrams + the other fields.
type Stats struct {
	Frames      uint64 // frames decoded
	Datagrams   uint64 // datagrams returned
	Unmatched   uint64 // UDP datagrams of no configured stream
	NotUDP      uint64 // IPv4 packets of another protocol
	NotIPv4     uint64 // frames of another EtherType (ARP, IPv6, two VLAN tags)
	Fragments   uint64 // IPv4 fragments, skipped
	Truncated   uint64 // frames cut short by the capture before the end of the datagram
	Malformed   uint64 // bad IPv4 or UDP header lengths
	BadChecksum uint64 // failed verification (Config.Checksums)
	LinkType    uint64 // frames of a link type this package does not decode
}

// Decoder turns frames into datagrams. It is not safe for concurrent use.
type Decoder struct {
	streams   []Stream
	checksums bool
	stats     Stats
}

// New returns a Decoder for cfg.
func New(cfg Config) (*Decoder, error) {
	if len(cfg.Streams) > MaxStreams {
		return nil, fmt.Errorf("udpcap: %d streams, more than %d", len(cfg.Streams), MaxStreams)
	}
	for _, s := range cfg.Streams {
		if !s.Group.Is4() || (s.Source.IsValid() && !s.Source.Is4()) {
			return nil, fmt.Errorf("udpcap: stream %v: not IPv4", s)
		}
	}
	return &Decoder{streams: append([]Stream(nil), cfg.Streams...), checksums: cfg.Checksums}, nil
}

// Stats returns the counters so far.
func (d *Decoder) Stats() Stats { return d.stats }

// EtherTypes and offsets used below.
const (
	etherTypeIPv4  = 0x0800
	etherTypeVLAN  = 0x8100
	etherTypeQinQ  = 0x88a8
	ipProtoUDP     = 17
	ipv4MinHdr     = 20
	udpHdr         = 8
	ethHdr         = 14
	sllHdr, sll2Hd = 16, 20
)

// Decode decodes one frame of the given link type (a pcap LINKTYPE_
// number; 0 is read as Ethernet) captured at ts. It returns the datagram
// and true, or false when the frame carries no datagram of a configured
// stream (the reason is counted in Stats). The datagram's Payload aliases
// data. Decode does not allocate.
func (d *Decoder) Decode(linkType uint16, data []byte, ts int64) (Datagram, bool) {
	d.stats.Frames++
	var ip []byte
	switch linkType {
	case frame.LinkTypeEthernet, 0:
		if len(data) < ethHdr {
			d.stats.Truncated++
			return Datagram{}, false
		}
		et := binary.BigEndian.Uint16(data[12:])
		ip = data[ethHdr:]
		if et == etherTypeVLAN || et == etherTypeQinQ {
			if len(ip) < 4 {
				d.stats.Truncated++
				return Datagram{}, false
			}
			et = binary.BigEndian.Uint16(ip[2:])
			ip = ip[4:]
		}
		if et != etherTypeIPv4 {
			d.stats.NotIPv4++
			return Datagram{}, false
		}
	case frame.LinkTypeLinuxSLL:
		if len(data) < sllHdr {
			d.stats.Truncated++
			return Datagram{}, false
		}
		if binary.BigEndian.Uint16(data[14:]) != etherTypeIPv4 {
			d.stats.NotIPv4++
			return Datagram{}, false
		}
		ip = data[sllHdr:]
	case frame.LinkTypeLinuxSLL2:
		if len(data) < sll2Hd {
			d.stats.Truncated++
			return Datagram{}, false
		}
		if binary.BigEndian.Uint16(data) != etherTypeIPv4 {
			d.stats.NotIPv4++
			return Datagram{}, false
		}
		ip = data[sll2Hd:]
	case frame.LinkTypeRaw, frame.LinkTypeIPv4:
		if len(data) > 0 && data[0]>>4 != 4 {
			d.stats.NotIPv4++
			return Datagram{}, false
		}
		ip = data
	default:
		d.stats.LinkType++
		return Datagram{}, false
	}
	return d.ipv4(ip, ts)
}

func (d *Decoder) ipv4(ip []byte, ts int64) (Datagram, bool) {
	if len(ip) < ipv4MinHdr {
		d.stats.Truncated++
		return Datagram{}, false
	}
	if ip[0]>>4 != 4 {
		d.stats.Malformed++
		return Datagram{}, false
	}
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ihl < ipv4MinHdr || total < ihl {
		d.stats.Malformed++
		return Datagram{}, false
	}
	if len(ip) < ihl {
		d.stats.Truncated++
		return Datagram{}, false
	}
	if ip[9] != ipProtoUDP {
		d.stats.NotUDP++
		return Datagram{}, false
	}
	if fo := binary.BigEndian.Uint16(ip[6:]); fo&0x3fff != 0 { // MF or an offset
		d.stats.Fragments++
		return Datagram{}, false
	}
	if len(ip) < total {
		d.stats.Truncated++
		return Datagram{}, false
	}
	if d.checksums && onesSum(ip[:ihl], 0) != 0xffff {
		d.stats.BadChecksum++
		return Datagram{}, false
	}
	udp := ip[ihl:total] // Ethernet padding past total is dropped
	if len(udp) < udpHdr {
		d.stats.Malformed++
		return Datagram{}, false
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < udpHdr || ulen > len(udp) {
		d.stats.Malformed++
		return Datagram{}, false
	}
	udp = udp[:ulen]
	if d.checksums && binary.BigEndian.Uint16(udp[6:]) != 0 && !udpChecksumOK(ip[12:20], udp) {
		d.stats.BadChecksum++
		return Datagram{}, false
	}
	src := netip.AddrFrom4([4]byte(ip[12:16]))
	dst := netip.AddrFrom4([4]byte(ip[16:20]))
	sport := binary.BigEndian.Uint16(udp[0:])
	dport := binary.BigEndian.Uint16(udp[2:])
	stream := -1
	if len(d.streams) > 0 {
		for i := range d.streams {
			s := &d.streams[i]
			if s.Port == dport && s.Group == dst && (!s.Source.IsValid() || s.Source == src) {
				stream = i
				break
			}
		}
		if stream < 0 {
			d.stats.Unmatched++
			return Datagram{}, false
		}
	}
	d.stats.Datagrams++
	return Datagram{
		Stream:  stream,
		Src:     netip.AddrPortFrom(src, sport),
		Dst:     netip.AddrPortFrom(dst, dport),
		Payload: udp[udpHdr:],
		Time:    ts,
	}, true
}

// onesSum adds b as big-endian 16-bit words to init in ones' complement.
func onesSum(b []byte, init uint32) uint16 {
	s := init
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// udpChecksumOK verifies a UDP checksum over the IPv4 pseudo-header (addrs
// holds source then destination address).
func udpChecksumOK(addrs, udp []byte) bool {
	s := uint32(onesSum(addrs, 0)) + ipProtoUDP + uint32(len(udp))
	return onesSum(udp, s) == 0xffff
}

// Run reads frames from src into batch until the end of the source and
// calls fn with every datagram, in capture order. The Datagram and its
// Payload are valid until fn returns. It returns nil at io.EOF, or the
// source's error. Run allocates nothing beyond the batch the caller gives.
func (d *Decoder) Run(src frame.Source, batch []frame.Frame, fn func(*Datagram)) error {
	if len(batch) == 0 {
		return errors.New("udpcap: empty batch")
	}
	var dg Datagram
	for {
		n, err := src.ReadFrames(batch)
		for i := range batch[:n] {
			// A truncated frame may still hold its whole datagram (only
			// padding cut); Decode checks the lengths it needs.
			f := &batch[i]
			var ok bool
			if dg, ok = d.Decode(f.LinkType, f.Data(), f.Time); ok {
				fn(&dg)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
