package tickwire

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
)

// timeWaitTable holds the connections in TIME-WAIT as Linux does: a small
// record each (the 4-tuple, both sequence numbers, the expiry), not the
// netstack endpoint, which costs about 8 KB and is released as soon as it
// enters the state. A TCPConn's timeWaitListener records the connection
// when netstack enters TIME-WAIT (startTimeWait notifies EventHUp with the
// endpoint locked), and netstack's own TIME-WAIT is set to 0, so the
// endpoint closes at once. The wire then answers the tuple's segments
// from the record (answer, as netstack's handleTimeWaitSegment would) until
// it expires, Config.TimeWait after the last FIN it acknowledged.
//
// It holds at most Config.MaxTimeWait records (as Linux's
// tcp_max_tw_buckets); a connection that finds it full closes without
// TIME-WAIT, counted in Stats.TCPTimeWaitOverflow. A record costs about 100
// bytes: its map entry and its place in the expiry ring (see add). When
// the last record expires, both are freed.
//
// Lock order: mu is a leaf; it may be taken under netstack's endpoint lock
// (add runs in netstack's notification).
type timeWaitTable struct {
	st     *gstack.Stack
	length int64 // ns: Config.TimeWait
	max    int   // Config.MaxTimeWait

	n        atomic.Int64  // records held: the wire's one-load check, Stats.TCPTimeWait
	overflow atomic.Uint64 // Stats.TCPTimeWaitOverflow
	reused   atomic.Uint64 // records dropped for a new connection on the tuple (tests)
	badSum   atomic.Uint64 // segments for a record dropped for their checksum: Stats.DropTCPChecksum

	mu sync.Mutex
	// +checklocks:mu
	recs map[twKey]twRecord
	// ring holds the records' expiries in the order they were added,
	// which is expiry order (one length for all); a record whose expiry a
	// retransmitted FIN moved is put back at the tail when its old expiry
	// comes round. A place whose record was dropped (a new connection took
	// the tuple) stays until its expiry, so the ring, not the map, is what
	// the bound counts.
	// +checklocks:mu
	ring []twExpiry
	// +checklocks:mu
	head int
	// +checklocks:mu
	count int
	// +checklocks:mu
	serial uint32
	// +checklocks:mu
	timer *time.Timer // fires at the head's expiry; nil until the first add
	// +checklocks:mu
	closed bool
}

// twKey is a connection's 4-tuple, from our side.
type twKey struct {
	local, remote [4]byte
	lport, rport  uint16
}

type twRecord struct {
	snd, rcv seqnum.Value // SndNxt and RcvNxt: what an ACK carries
	serial   uint32       // which ring place is the record's
	expiry   int64        // netstackunsafe.Nanotime
}

type twExpiry struct {
	key    twKey
	serial uint32
	expiry int64
}

func newTimeWaitTable(st *gstack.Stack, length time.Duration, max int) *timeWaitTable {
	return &timeWaitTable{st: st, length: int64(length), max: max}
}

// add records the connection k in TIME-WAIT with its SndNxt and RcvNxt,
// reporting false (and counting it) when the table is full.
func (t *timeWaitTable) add(k twKey, snd, rcv seqnum.Value) bool {
	now := netstackunsafe.Nanotime()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.expireLocked(now)
	if t.count >= t.max {
		t.overflow.Add(1)
		return false
	}
	if t.recs == nil {
		t.recs = make(map[twKey]twRecord)
	}
	if _, ok := t.recs[k]; !ok {
		t.n.Add(1)
	}
	t.serial++
	exp := now + t.length
	t.recs[k] = twRecord{snd: snd, rcv: rcv, serial: t.serial, expiry: exp}
	t.pushLocked(twExpiry{key: k, serial: t.serial, expiry: exp})
	if t.count == 1 {
		t.armLocked(now)
	}
	return true
}

// pushLocked appends e to the ring, growing it (by doubling, up to max).
// +checklocks:t.mu
func (t *timeWaitTable) pushLocked(e twExpiry) {
	if t.count == len(t.ring) {
		grown := make([]twExpiry, min(max(2*len(t.ring), 64), t.max))
		n := copy(grown, t.ring[t.head:])
		copy(grown[n:], t.ring[:t.head])
		t.ring, t.head = grown, 0
	}
	t.ring[(t.head+t.count)%len(t.ring)] = e
	t.count++
}

// expireLocked drops the records that expired by now.
// +checklocks:t.mu
func (t *timeWaitTable) expireLocked(now int64) {
	for t.count > 0 {
		e := t.ring[t.head]
		if e.expiry > now {
			return
		}
		t.ring[t.head] = twExpiry{}
		t.head = (t.head + 1) % len(t.ring)
		t.count--
		r, ok := t.recs[e.key]
		switch {
		case !ok || r.serial != e.serial: // dropped or recorded again since
		case r.expiry > now: // a retransmitted FIN moved it
			t.pushLocked(twExpiry{key: e.key, serial: e.serial, expiry: r.expiry})
		default:
			delete(t.recs, e.key)
			t.n.Add(-1)
		}
	}
	// Empty: let the map and ring go, which a busy period grew.
	t.recs, t.ring, t.head = nil, nil, 0
}

// armLocked sets the timer for the head's expiry.
// +checklocks:t.mu
func (t *timeWaitTable) armLocked(now int64) {
	if t.count == 0 || t.closed {
		return
	}
	d := time.Duration(t.ring[t.head].expiry - now)
	if t.timer == nil {
		t.timer = time.AfterFunc(d, t.sweep)
		return
	}
	t.timer.Reset(d)
}

// sweep is the timer's function: it drops what expired and re-arms.
func (t *timeWaitTable) sweep() {
	now := netstackunsafe.Nanotime()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
	t.armLocked(now)
}

// close stops the timer and drops every record.
func (t *timeWaitTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.recs, t.ring, t.head, t.count = nil, nil, 0, 0
	t.n.Store(0)
}

// forget drops k's record, if any, when a new connection takes the tuple.
func (t *timeWaitTable) forget(k twKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.recs[k]; ok {
		delete(t.recs, k)
		t.n.Add(-1)
		t.reused.Add(1)
	}
}

// forgetSYN drops the record of the tuple of pkt, an outbound IPv4 TCP
// segment, when it is a SYN without ACK: this stack dials again from a
// port netstack freed, as Linux's tcp_tw_reuse lets it. netstack's initial
// sequence numbers grow with time (RFC 6528), so the peer, whose side is
// closed, takes it as a new connection. One atomic load when the table is
// empty.
func (t *timeWaitTable) forgetSYN(pkt *gstack.PacketBuffer) {
	if t == nil || t.n.Load() == 0 {
		return
	}
	ip := header.IPv4(pkt.NetworkHeader().Slice())
	h := header.TCP(pkt.TransportHeader().Slice())
	if len(ip) < header.IPv4MinimumSize || len(h) < header.TCPMinimumSize ||
		h.Flags()&(header.TCPFlagSyn|header.TCPFlagAck) != header.TCPFlagSyn {
		return
	}
	t.forget(twKey{local: ip.SourceAddress().As4(), remote: ip.DestinationAddress().As4(),
		lport: h.SourcePort(), rport: h.DestinationPort()})
}

// twAction is what answer decides for a segment.
type twAction int

const (
	twPass twAction = iota // no record: netstack's
	twDrop                 // silently dropped
	twACK                  // answered with an ACK
	twNew                  // a new connection: record dropped, netstack's
)

// screen answers pkt, an inbound IPv4 TCP segment (IPv4 header ip, TCP
// header h, payload bytes), from its connection's TIME-WAIT record, and
// reports whether it took it; false leaves it to netstack. One atomic load
// when no connection is in TIME-WAIT, a map lookup under the table's lock
// otherwise. A matching segment's checksum is verified first (unless the
// link did, csumDone): a corrupt one is dropped and counted (netstack,
// which finds no endpoint for it, would drop it without a count tickwire
// can read).
func (t *timeWaitTable) screen(pkt *gstack.PacketBuffer, ip header.IPv4, h header.TCP, payload int, csumDone bool) bool {
	if t == nil || t.n.Load() == 0 {
		return false
	}
	k := twKey{local: ip.DestinationAddress().As4(), remote: ip.SourceAddress().As4(),
		lport: h.DestinationPort(), rport: h.SourcePort()}
	t.mu.Lock()
	_, ok := t.recs[k]
	t.mu.Unlock()
	if !ok {
		return false
	}
	if !csumDone && !tcpChecksumValid(pkt, ip) {
		t.badSum.Add(1)
		return true
	}
	act, snd, rcv := t.answer(k, h, payload, netstackunsafe.Nanotime())
	switch act {
	case twPass, twNew:
		return false
	case twACK:
		t.sendACK(k, snd, rcv)
	}
	return true
}

// answer decides what the record of k makes of a segment with header h and
// payload bytes at now, as netstack's handleTimeWaitSegment does (RFC
// 9293 3.10.7.4, RFC 1337 for RSTs), and returns the ACK's numbers. It
// does not send.
func (t *timeWaitTable) answer(k twKey, h header.TCP, payload int, now int64) (act twAction, snd, rcv seqnum.Value) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.recs[k]
	if !ok {
		return twPass, 0, 0
	}
	seq, flags := seqnum.Value(h.SequenceNumber()), h.Flags()
	switch {
	case flags&header.TCPFlagRst != 0:
		// No TIME-WAIT assassination (RFC 1337): netstack's rule, where
		// Linux's default drops the record.
		return twDrop, 0, 0
	case flags&header.TCPFlagSyn != 0 && flags&header.TCPFlagAck == 0 && r.rcv.LessThan(seq):
		// A new connection whose initial sequence number is above
		// anything seen in the old one (RFC 6191 without timestamps,
		// RFC 1122 4.2.2.13): the tuple is free again.
		delete(t.recs, k)
		t.n.Add(-1)
		t.reused.Add(1)
		return twNew, 0, 0
	case flags&header.TCPFlagSyn != 0 && flags&header.TCPFlagAck == 0:
		// An old duplicate, or a new connection that chose a lower
		// initial sequence number: a challenge ACK (RFC 5961 4), as
		// Linux sends, which a peer that has forgotten the connection
		// answers with a RST, and then retries its SYN. netstack drops it.
		return twACK, r.snd, r.rcv
	case flags&header.TCPFlagAck == 0:
		return twDrop, 0, 0
	case flags&header.TCPFlagFin != 0 && seq.Add(1) == r.rcv:
		// The peer's FIN again: our last ACK was lost. Acknowledge it
		// and start TIME-WAIT afresh.
		r.expiry = now + t.length
		t.recs[k] = r
		return twACK, r.snd, r.rcv
	case seq != r.rcv || payload != 0:
		return twACK, r.snd, r.rcv // out of window or data: re-synchronise
	}
	return twDrop, 0, 0 // a duplicate ACK
}

// sendACK sends the ACK of a record: seq snd, ack rcv, no options, a zero
// window (the connection receives nothing more). A failure (no route, the
// neighbour unresolved) is netstack's to count; the peer retransmits.
func (t *timeWaitTable) sendACK(k twKey, snd, rcv seqnum.Value) {
	local, remote := tcpip.AddrFrom4(k.local), tcpip.AddrFrom4(k.remote)
	r, err := t.st.FindRoute(nicID, local, remote, ipv4.ProtocolNumber, false)
	if err != nil {
		return
	}
	defer r.Release()
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{ReserveHeaderBytes: header.TCPMinimumSize + int(r.MaxHeaderLength())})
	defer pkt.DecRef()
	h := header.TCP(pkt.TransportHeader().Push(header.TCPMinimumSize))
	pkt.TransportProtocolNumber = header.TCPProtocolNumber
	h.Encode(&header.TCPFields{
		SrcPort: k.lport, DstPort: k.rport, SeqNum: uint32(snd), AckNum: uint32(rcv),
		DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagAck,
	})
	if r.RequiresTXTransportChecksum() {
		h.SetChecksum(^h.CalculateChecksum(r.PseudoHeaderChecksum(tcp.ProtocolNumber, header.TCPMinimumSize)))
	}
	_ = r.WritePacket(gstack.NetworkHeaderParams{Protocol: tcp.ProtocolNumber, TTL: r.DefaultTTL()}, pkt)
}

// tcpChecksumValid reports whether the TCP segment in pkt, whose IPv4
// header is ip, has a valid checksum.
func tcpChecksumValid(pkt *gstack.PacketBuffer, ip header.IPv4) bool {
	ihl, total := int(ip.HeaderLength()), int(ip.TotalLength())
	b, ok := pkt.Data().PullUp(total)
	if !ok || total < ihl+header.TCPMinimumSize {
		return false
	}
	seg := header.TCP(b[ihl:total])
	off := int(seg.DataOffset())
	if off < header.TCPMinimumSize || off > len(seg) {
		return false
	}
	payload := seg[off:]
	return seg.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(payload, 0), uint16(len(payload)))
}

// timeWaitListener records its connection in the stack's timeWaitTable
// when netstack enters TIME-WAIT. It is registered for EventHUp on the
// connection's waiter queue for the connection's life: netstack notifies
// EventHUp when it starts TIME-WAIT (with the endpoint locked, which
// netstackunsafe.TimeWaitPoints needs) and when the endpoint closes or
// fails; only the first finds the state TIME-WAIT.
type timeWaitListener struct{ c *TCPConn }

// NotifyEvent implements waiter.EventListener.NotifyEvent.
func (l timeWaitListener) NotifyEvent(waiter.EventMask) {
	c := l.c
	ep, ok := c.ep.(*tcp.Endpoint)
	if !ok || ep.EndpointState() != tcp.StateTimeWait || !c.timeWaitSeen.CompareAndSwap(false, true) {
		return
	}
	k, ok := tupleOf(c.laddr, c.raddr)
	if !ok {
		return
	}
	snd, rcv := netstackunsafe.TimeWaitPoints(ep)
	c.s.wire.tw.add(k, snd, rcv)
}

// tupleOf returns the 4-tuple of a connection with these addresses.
func tupleOf(laddr, raddr *net.TCPAddr) (twKey, bool) {
	if laddr == nil || raddr == nil {
		return twKey{}, false
	}
	l, r := laddr.IP.To4(), raddr.IP.To4()
	if l == nil || r == nil {
		return twKey{}, false
	}
	k := twKey{lport: uint16(laddr.Port), rport: uint16(raddr.Port)}
	copy(k.local[:], l)
	copy(k.remote[:], r)
	return k, true
}
