package main

import (
	"encoding/binary"
	"net"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Offsets in the frames built here: Ethernet (14) + IPv4 without options (20).
const (
	frameSeqOff = 14 + 20 + 4
	frameSumOff = 14 + 20 + 16
)

// flowFrames is one TCP flow direction as Ethernet frames: a SYN, then
// data segments whose sequence numbers advance by a whole pass each time
// advance is called, so the frames can be replayed to a reassembler
// forever.
type flowFrames struct {
	syn    []byte
	frames [][]byte
	order  []int  // frame index for each position of a pass
	span   uint32 // payload bytes of one pass
}

// buildFlow frames payloads as consecutive segments of one flow, in the
// order given by order (nil: in order). The ISN sits just below 2^32 so the
// sequence numbers wrap early.
func buildFlow(payloads [][]byte, order []int) (*flowFrames, error) {
	const isn = 0xfff00000
	f := &flowFrames{order: order}
	syn, err := tcpFrame(isn, true, nil)
	if err != nil {
		return nil, err
	}
	f.syn = syn
	seq := uint32(isn + 1)
	for _, p := range payloads {
		fr, err := tcpFrame(seq, false, p)
		if err != nil {
			return nil, err
		}
		f.frames = append(f.frames, fr)
		seq += uint32(len(p))
	}
	f.span = seq - (isn + 1)
	if f.order == nil {
		f.order = make([]int, len(payloads))
		for i := range f.order {
			f.order[i] = i
		}
	}
	return f, nil
}

var (
	flowSrcMAC = net.HardwareAddr{0x02, 0x53, 0x53, 0x45, 0, 1}
	flowDstMAC = net.HardwareAddr{0x02, 0x76, 0x64, 0x72, 0, 1}
	flowSrcIP  = net.IPv4(10, 31, 0, 1)
	flowDstIP  = net.IPv4(10, 32, 0, 10)
)

// tcpFrame serializes one segment (server 9129 -> client 50000) with
// correct checksums.
func tcpFrame(seq uint32, syn bool, payload []byte) ([]byte, error) {
	eth := &layers.Ethernet{SrcMAC: flowSrcMAC, DstMAC: flowDstMAC, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolTCP, SrcIP: flowSrcIP, DstIP: flowDstIP}
	tcp := &layers.TCP{SrcPort: 9129, DstPort: 50000, Seq: seq, Ack: 1, Window: 65535, SYN: syn, ACK: !syn, PSH: !syn}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		return nil, err
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, tcp, gopacket.Payload(payload)); err != nil {
		return nil, err
	}
	return append([]byte(nil), buf.Bytes()...), nil
}

// advance moves every data frame one pass further in sequence space and
// patches its TCP checksum incrementally (RFC 1624: only the sequence
// number words changed).
func (f *flowFrames) advance() {
	for _, fr := range f.frames {
		old := binary.BigEndian.Uint32(fr[frameSeqOff:])
		nw := old + f.span
		binary.BigEndian.PutUint32(fr[frameSeqOff:], nw)
		sum := uint32(^binary.BigEndian.Uint16(fr[frameSumOff:]))
		sum += uint32(^uint16(old>>16)) + uint32(^uint16(old)) + nw>>16 + nw&0xffff
		for sum > 0xffff {
			sum = sum>>16 + sum&0xffff
		}
		binary.BigEndian.PutUint16(fr[frameSumOff:], ^uint16(sum))
	}
}

// passes replays the frames through handle, a pass at a time, until dur of
// timed passes has elapsed; advance runs between passes, untimed. It
// returns the frames handled and the timed duration.
func (f *flowFrames) passes(dur time.Duration, handle func(frame []byte, ts int64) error) (int64, time.Duration, error) {
	var n int64
	var timed time.Duration
	ts := time.Now().UnixNano()
	for timed < dur {
		start := time.Now()
		for _, i := range f.order {
			if err := handle(f.frames[i], ts); err != nil {
				return n, timed, err
			}
			ts += 1000
		}
		timed += time.Since(start)
		n += int64(len(f.order))
		f.advance()
	}
	return n, timed, nil
}
