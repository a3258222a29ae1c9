package dmaring

import (
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// TxStamp says when one frame left the device and which bytes it carried:
// for an order sent on a TCP connection, the wire time of the segment
// holding it (Config.TxStamps, Endpoint.TxStamps).
type TxStamp struct {
	// Time is when the frame's last bit left the device, in nanoseconds
	// since the Unix epoch on the device clock (the TX completion's stamp);
	// 0 when the device did not set its clock or refused the frame.
	Time int64
	// Queue is the TX queue the frame was sent on.
	Queue int
	// Len is the frame's length in bytes.
	Len int
	// Err reports that the device refused the descriptor (an error
	// completion): the frame did not leave, and only Queue is set.
	Err bool
	// Proto is the IP protocol of an IPv4 TCP or UDP frame that is not a
	// fragment (6 or 17), else 0 and the fields below are zero.
	Proto uint8
	// Src and Dst are the frame's IPv4 addresses and ports.
	Src, Dst netip.AddrPort
	// Seq is a TCP segment's sequence number: the segment carried the
	// stream's bytes Seq to Seq+Payload (mod 2^32).
	Seq uint32
	// Payload is the TCP or UDP payload length in bytes.
	Payload int
}

// stampLocked keeps the stamp of the TX completion at off (the device has
// completed the descriptor: its buffer still holds the frame, which the
// host does not reuse before this reclaim), dropping the oldest kept stamp
// when the ring is full.
//
// +checklocks:q.mu
func (q *txQueue) stampLocked(off int) {
	mask := uint32(len(q.stamps) - 1)
	if q.stampHead-q.stampTail > mask {
		q.stampTail++
		q.stats.stampsLost.Add(1)
	}
	s := &q.stamps[q.stampHead&mask]
	q.stampHead++
	c := q.r.mem[off : off+CplSize]
	*s = TxStamp{Queue: q.idx}
	if c[CplStatus] != 0 {
		s.Err = true
		return
	}
	s.Time = q.ts.unix(q.r, le.Uint32(c[CplTsNs:]), le.Uint16(c[CplTsS:]))
	// The length the host posted, not the completion's: the descriptor
	// is the host's own.
	i := int(q.done & (q.size - 1))
	n := min(int(le.Uint32(q.r.mem[q.ring+i*DescSize+DescLen:])), q.bufSize)
	s.Len = n
	at := q.bufs + i*q.bufSize
	s.setFlow(q.r.mem[at : at+n])
}

// setFlow fills the flow fields from frame f when it is an IPv4 TCP or UDP
// packet that is not a fragment. It reads the headers only.
func (s *TxStamp) setFlow(f []byte) {
	ip, seg, ok := linkbase.IPv4Segment(f)
	if !ok {
		return
	}
	var sport, dport uint16
	switch ip.TransportProtocol() {
	case header.TCPProtocolNumber:
		t := header.TCP(seg)
		if len(seg) < header.TCPMinimumSize || int(t.DataOffset()) < header.TCPMinimumSize || int(t.DataOffset()) > len(seg) {
			return
		}
		sport, dport = t.SourcePort(), t.DestinationPort()
		s.Seq, s.Payload = t.SequenceNumber(), len(seg)-int(t.DataOffset())
		s.Proto = uint8(header.TCPProtocolNumber)
	case header.UDPProtocolNumber:
		if len(seg) < header.UDPMinimumSize {
			return
		}
		u := header.UDP(seg)
		sport, dport = u.SourcePort(), u.DestinationPort()
		s.Payload = len(seg) - header.UDPMinimumSize
		s.Proto = uint8(header.UDPProtocolNumber)
	default:
		return
	}
	s.Src = netip.AddrPortFrom(netip.AddrFrom4(ip.SourceAddress().As4()), sport)
	s.Dst = netip.AddrPortFrom(netip.AddrFrom4(ip.DestinationAddress().As4()), dport)
}

// takeStamps reclaims the queue's completions and moves up to len(dst) of
// its kept stamps, oldest first, into dst.
func (q *txQueue) takeStamps(dst []TxStamp) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.stamps == nil {
		return 0
	}
	q.reclaimLocked()
	mask := uint32(len(q.stamps) - 1)
	n := 0
	for ; n < len(dst) && q.stampTail != q.stampHead; n++ {
		dst[n] = q.stamps[q.stampTail&mask]
		q.stampTail++
	}
	return n
}

// TxStamps moves into dst the TX stamps kept since the last call
// (Config.TxStamps): when each frame sent left the device, and its flow and
// TCP sequence number, so that an order's wire time can be found from the
// connection's sequence numbers. It first collects the completions the
// device wrote, so a frame's stamp is here as soon as the device completed
// it; poll it after sending. Stamps come oldest first within a queue; the
// queues take turns being first. A queue keeps its last 2^RingLog stamps:
// older ones not taken in time are dropped and counted
// (Stats.TxStampsLost). It returns how many it moved, 0 without
// Config.TxStamps or after Close. It does not allocate.
func (e *Endpoint) TxStamps(dst []TxStamp) int {
	first := int(e.stampQ.Add(1)) % len(e.tx)
	n := 0
	for i := range e.tx {
		if n == len(dst) {
			break
		}
		n += e.tx[(first+i)%len(e.tx)].takeStamps(dst[n:])
	}
	return n
}
