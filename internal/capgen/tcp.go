package capgen

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
)

// Endpoint is one side of a TCP connection.
type Endpoint struct {
	MAC  [6]byte
	Addr netip.Addr // IPv4
	Port uint16
}

// Impairments are the per-segment probabilities, each in [0, 1], of what a
// mirror port does to the data segments of a flow.
type Impairments struct {
	// Loss drops the segment from the capture for good (the mirror missed
	// it and every retransmission of it).
	Loss float64
	// Reorder delays the segment behind the next 1 to 3 data segments.
	Reorder float64
	// Dup captures the segment twice (an exact retransmission).
	Dup float64
	// Overlap adds a retransmission that covers the second half of the
	// segment and the first half of the next one, with the same bytes.
	Overlap float64
}

func (im Impairments) validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", im.Loss}, {"reorder", im.Reorder}, {"dup", im.Dup}, {"overlap", im.Overlap}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("feed: %s probability %v outside [0, 1]", p.name, p.v)
		}
	}
	return nil
}

// Range is a byte range [Offset, Offset+Length) of a stream.
type Range struct {
	Offset uint64 `json:"offset"`
	Length uint64 `json:"length"`
}

// segment is one TCP segment to be framed: which bytes of the stream it
// carries and its flags.
type segment struct {
	fromServer bool
	flags      uint8
	seq, ack   uint32
	data       []byte // aliases the stream
	when       int64  // logical send time, ns; capture time is assigned later
	synMSS     uint16 // MSS option value on SYN and SYN-ACK
}

// TCP flags.
const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
	flagPSH = 0x08
	flagACK = 0x10
)

// flowPlan is the emission order of one flow's segments, impairments
// applied, and what the impairments left uncovered.
type flowPlan struct {
	segs []segment
	lost []Range // stream ranges no emitted segment covers, sorted
}

// send is one write of the server application: the stream bytes
// [start, end) handed to TCP at logical time when.
type send struct {
	start, end int
	when       int64
}

// planFlow segments the server's stream at mss, wraps it in a handshake and a
// close, and applies the impairments to the data segments. Server data
// segments are acknowledged by the client every second segment, as Linux
// does with delayed ACKs.
func planFlow(rng *rand.Rand, stream []byte, sends []send, mss int, im Impairments, serverISN, clientISN uint32, start, end int64) flowPlan {
	var plan flowPlan
	sISN, cISN := serverISN, clientISN
	plan.segs = append(plan.segs,
		segment{fromServer: false, flags: flagSYN, seq: cISN, when: start, synMSS: uint16(mss)},
		segment{fromServer: true, flags: flagSYN | flagACK, seq: sISN, ack: cISN + 1, when: start + 30_000, synMSS: uint16(mss)},
		segment{fromServer: false, flags: flagACK, seq: cISN + 1, ack: sISN + 1, when: start + 60_000},
	)

	// Data segments before impairment, in send order.
	var data []segment
	for _, s := range sends {
		for off := s.start; off < s.end; off += mss {
			stop := min(off+mss, s.end)
			flags := uint8(flagACK)
			if stop == s.end {
				flags |= flagPSH
			}
			data = append(data, segment{
				fromServer: true, flags: flags,
				seq: sISN + 1 + uint32(off), ack: cISN + 1,
				data: stream[off:stop], when: s.when,
			})
		}
	}

	// Impairments. delayed holds reordered segments with the index of the
	// original segment after which they go out.
	type held struct {
		after int
		seg   segment
	}
	var delayed []held
	covered := make([]Range, 0, len(data)+8)
	emit := func(sg segment) {
		plan.segs = append(plan.segs, sg)
		covered = append(covered, Range{uint64(sg.seq - sISN - 1), uint64(len(sg.data))})
	}
	acked := 0
	for i, sg := range data {
		if rng.Float64() >= im.Loss {
			switch {
			case rng.Float64() < im.Reorder:
				delayed = append(delayed, held{i + 1 + rng.IntN(3), sg})
			default:
				emit(sg)
			}
			if rng.Float64() < im.Dup {
				delayed = append(delayed, held{i + rng.IntN(2), sg})
			}
		}
		if rng.Float64() < im.Overlap && len(sg.data) > 1 {
			// Second half of this segment plus the first half of the
			// next one (or only the tail when this is the last).
			from := uint32(len(sg.data) / 2)
			n := len(sg.data) - int(from)
			if i+1 < len(data) {
				n += len(data[i+1].data) / 2
			}
			off := int(sg.seq-sISN-1) + int(from)
			ov := segment{fromServer: true, flags: flagACK, seq: sg.seq + from, ack: sg.ack, data: stream[off : off+n], when: sg.when}
			delayed = append(delayed, held{i + 1, ov})
		}
		// Release what is due after segment i, in the order it was held.
		kept := delayed[:0]
		for _, h := range delayed {
			if h.after <= i {
				emit(h.seg)
			} else {
				kept = append(kept, h)
			}
		}
		delayed = kept
		// The real receiver acknowledges every second segment.
		if (i+1)%2 == 0 || i == len(data)-1 {
			acked = int(sg.seq-sISN-1) + len(sg.data)
			plan.segs = append(plan.segs, segment{fromServer: false, flags: flagACK, seq: cISN + 1, ack: sISN + 1 + uint32(acked), when: sg.when + 20_000})
		}
	}
	for _, h := range delayed {
		emit(h.seg)
	}

	finSeq := sISN + 1 + uint32(len(stream))
	plan.segs = append(plan.segs,
		segment{fromServer: true, flags: flagFIN | flagACK, seq: finSeq, ack: cISN + 1, when: end},
		segment{fromServer: false, flags: flagFIN | flagACK, seq: cISN + 1, ack: finSeq + 1, when: end + 30_000},
		segment{fromServer: true, flags: flagACK, seq: finSeq + 1, ack: cISN + 2, when: end + 60_000},
	)
	plan.lost = uncovered(covered, uint64(len(stream)))
	return plan
}

// uncovered returns the parts of [0, total) that no range covers, sorted.
func uncovered(rs []Range, total uint64) []Range {
	sortRanges(rs)
	lost := []Range{}
	next := uint64(0)
	for _, r := range rs {
		if r.Offset > next {
			lost = append(lost, Range{next, r.Offset - next})
		}
		next = max(next, r.Offset+r.Length)
	}
	if next < total {
		lost = append(lost, Range{next, total - next})
	}
	return lost
}

func sortRanges(rs []Range) {
	// Insertion sort: the ranges arrive almost sorted.
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Offset < rs[j-1].Offset; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// Frame header sizes.
const (
	ethHeaderLen  = 14
	vlanTagLen    = 4
	ipv4HeaderLen = 20
	tcpHeaderLen  = 20
	minFrameLen   = 60 // Ethernet minimum without FCS: shorter frames are padded
)

// frameBuilder writes Ethernet/IPv4/TCP frames for one connection.
type frameBuilder struct {
	server, client Endpoint
	vlan           uint16 // 0: untagged
	ipID           [2]uint16
}

// appendFrame appends the frame for sg to dst. IPv4 and TCP checksums are
// correct; frames shorter than the Ethernet minimum are zero-padded, the
// padding outside the IPv4 total length as on a real wire.
func (fb *frameBuilder) appendFrame(dst []byte, sg *segment) []byte {
	src, dstEP := fb.client, fb.server
	dir := 0
	if sg.fromServer {
		src, dstEP = fb.server, fb.client
		dir = 1
	}
	start := len(dst)
	dst = append(dst, dstEP.MAC[:]...)
	dst = append(dst, src.MAC[:]...)
	if fb.vlan != 0 {
		dst = binary.BigEndian.AppendUint16(dst, 0x8100)
		dst = binary.BigEndian.AppendUint16(dst, fb.vlan&0x0fff)
	}
	dst = binary.BigEndian.AppendUint16(dst, 0x0800)

	tcpLen := tcpHeaderLen
	if sg.synMSS != 0 {
		tcpLen += 4
	}
	ipStart := len(dst)
	total := ipv4HeaderLen + tcpLen + len(sg.data)
	fb.ipID[dir]++
	dst = append(dst,
		0x45, 0, byte(total>>8), byte(total),
		byte(fb.ipID[dir]>>8), byte(fb.ipID[dir]), 0x40, 0, // DF
		64, 6, 0, 0, // TTL, TCP, checksum below
	)
	srcIP, dstIP := src.Addr.As4(), dstEP.Addr.As4()
	dst = append(dst, srcIP[:]...)
	dst = append(dst, dstIP[:]...)
	binary.BigEndian.PutUint16(dst[ipStart+10:], ^onesSum(0, dst[ipStart:ipStart+ipv4HeaderLen]))

	tcpStart := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, src.Port)
	dst = binary.BigEndian.AppendUint16(dst, dstEP.Port)
	dst = binary.BigEndian.AppendUint32(dst, sg.seq)
	ack := sg.ack
	if sg.flags&flagACK == 0 {
		ack = 0
	}
	dst = binary.BigEndian.AppendUint32(dst, ack)
	dst = append(dst, byte(tcpLen/4)<<4, sg.flags)
	dst = binary.BigEndian.AppendUint16(dst, 65535) // window
	dst = append(dst, 0, 0, 0, 0)                   // checksum, urgent pointer
	if sg.synMSS != 0 {
		dst = append(dst, 2, 4, byte(sg.synMSS>>8), byte(sg.synMSS))
	}
	dst = append(dst, sg.data...)
	// Pseudo-header: addresses, protocol, TCP length.
	sum := onesSum(0, dst[ipStart+12:ipStart+20])
	sum = onesSum(sum, []byte{0, 6, byte((tcpLen + len(sg.data)) >> 8), byte(tcpLen + len(sg.data))})
	sum = onesSum(sum, dst[tcpStart:])
	binary.BigEndian.PutUint16(dst[tcpStart+16:], ^sum)

	for len(dst)-start < minFrameLen {
		dst = append(dst, 0)
	}
	return dst
}

// onesSum adds b to the 16-bit one's complement sum, folded.
func onesSum(sum uint16, b []byte) uint16 {
	s := uint32(sum)
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// AppendDataFrame appends to dst the Ethernet frame of one TCP data segment
// (ACK and PSH set) from server to client carrying data at sequence number
// seq, with correct checksums, as the generated feeds carry them. It is for
// tests that build captures of their own shape, such as many flows each
// with a hole.
func AppendDataFrame(dst []byte, server, client Endpoint, seq uint32, data []byte) []byte {
	fb := frameBuilder{server: server, client: client}
	return fb.appendFrame(dst, &segment{fromServer: true, flags: flagACK | flagPSH, seq: seq, ack: 1, data: data})
}
