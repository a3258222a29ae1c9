package tickwire

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
	"github.com/tickwire/tickwire/internal/rxclock"
)

// The bounds admit applies to an endpoint's queue of inbound segments, in
// netstack's accounting (netstackunsafe.QueuedBytes: a segment without
// payload counts about 800 bytes).
const (
	// listenQueueBytes is a listener's receive buffer, set when it
	// listens, which is its queue's bound: about 300 segments, 2 to 5 ms
	// of a SYN flood that one core can take.
	listenQueueBytes = 256 << 10
	// listenDataReserve is the part of a listener's queue that segments
	// without payload may fill only as retries (see refusedSet), so that
	// a client's first data, which completes a SYN-cookie handshake whose
	// ACK was lost, still finds room during a flood of SYNs or ACKs.
	listenDataReserve = 64 << 10
	// emptySegmentAllowance is how far beyond its receive buffer a
	// connection's queue may go with segments without payload (ACKs,
	// RSTs, FINs): about 80, so that a connection whose program does not
	// read still hears its peer's acknowledgments.
	emptySegmentAllowance = 64 << 10
	// floodAdmitRate is how many segments without payload a flooded
	// listener takes a second that are not retries (see floodGate):
	// about 5% of a core of netstack's SYN-cookie work, so that the
	// link's reader keeps the machine for reading, and refusing, what
	// arrives.
	floodAdmitRate = 2000
	// floodAdmitBurst is how many of them may come at once: the queue's
	// open part holds about 240.
	floodAdmitBurst = 256
	// floodHold is how long a listener stays flooded after its last
	// refused segment.
	floodHold = 1e9 // ns
)

// queuedProtocol is netstack's interface for transport protocols that queue
// inbound packets (the stack checks for it when it is built).
type queuedProtocol interface {
	QueuePacket(gstack.TransportEndpoint, gstack.TransportEndpointID, *gstack.PacketBuffer)
}

// tcpProtocol is netstack's TCP protocol with tickwire's QueuePacket, which
// netstack's demultiplexer calls for every inbound segment it found an
// endpoint for. It bounds what an endpoint's queue holds (admit) and, in
// latency mode, queues segments of established connections for the
// delivering goroutine to process (see syncer). Every other method is
// netstack's.
type tcpProtocol struct {
	gstack.TransportProtocol
	queue queuedProtocol
	sy    *syncer // nil outside latency mode
	// queueFull counts segments refused by admit, retries those admitted
	// as repeats of refused ones.
	queueFull, retries atomic.Uint64
	refused            refusedSet
	st                 *gstack.Stack
	// listeners are the stack's TCP listeners, for refuseEarly; replaced
	// whole under listenersMu.
	listeners   atomic.Pointer[[]listenerPort]
	listenersMu sync.Mutex
	// rx passes receive times from the wire; conns are the connections
	// that keep them (rxtime.go).
	rx    rxStash
	conns rxConns
	drops *tcpip.StatCounter // netstack's DroppedPackets, which DropTotal reports
	// inline is set in stock mode over a link that delivers inline
	// (link.InlineDeliverer): the segments a goroutine waits for in a
	// connection's setup and teardown are then processed by the
	// delivering goroutine (see deferProcessing). Set once by New.
	inline bool
}

var (
	_ queuedProtocol          = (*tcpProtocol)(nil)
	_ gstack.SendBufSizeProto = (*tcpProtocol)(nil)
)

// SendBufferSize implements stack.SendBufSizeProto, which netstack's TCP
// asks its stack for through the protocol.
func (p *tcpProtocol) SendBufferSize() tcpip.TCPSendBufferSizeRangeOption {
	return p.TransportProtocol.(gstack.SendBufSizeProto).SendBufferSize()
}

// tcpFactory returns the TCP protocol factory for a stack: tickwire's
// tcpProtocol, with latency mode's processing when sy is not nil; netstack's
// own when the tcp internals it needs were not found
// (netstackunsafe.Available), in which case latency mode is off (New sees
// sy.tcp nil) and segments without payload are not bounded.
func tcpFactory(sy *syncer, tp **tcpProtocol) gstack.TransportProtocolFactory {
	return func(st *gstack.Stack) gstack.TransportProtocol {
		p := tcp.NewProtocol(st)
		q, ok := p.(queuedProtocol)
		if _, sb := p.(gstack.SendBufSizeProto); !ok || !sb || !netstackunsafe.Available() {
			return p
		}
		proto := &tcpProtocol{TransportProtocol: p, queue: q, sy: sy, st: st, drops: st.Stats().DroppedPackets}
		proto.refused.seed = maphash.MakeSeed()
		if sy != nil {
			sy.tcp = proto
		}
		*tp = proto
		return proto
	}
}

// admit reports whether pkt, a segment for ep, may join ep's queue, and
// counts it when not. netstack's queue admits a segment with payload while
// the endpoint's memory is within its receive buffer, and one without
// payload at any level, which lets a flood of SYNs, ACKs or RSTs queue
// without bound. admit keeps netstack's rule for payload (netstack would
// drop the segment anyway, counting it nowhere tickwire can read) and
// bounds the others:
//   - at a listener, to its receive buffer (listenQueueBytes) less
//     listenDataReserve, the reserve being open to segments that repeat
//     one refused lately: a real client's retransmission, which a flood's
//     segments are not;
//   - at a connection, to its receive buffer plus emptySegmentAllowance.
//
// A refused segment is dropped, as a kernel drops what finds its backlog
// full; the peer retransmits what matters.
func (p *tcpProtocol) admit(ep *tcp.Endpoint, id gstack.TransportEndpointID, tcpHdr header.TCP, payload int) bool {
	ok, retry := p.decide(ep, id, tcpHdr, payload)
	switch {
	case !ok:
		p.refuse()
	case retry:
		p.retries.Add(1)
	}
	return ok
}

// decide is admit without the counting: whether the segment may join
// ep's queue, and whether as a retry.
func (p *tcpProtocol) decide(ep *tcp.Endpoint, id gstack.TransportEndpointID, tcpHdr header.TCP, payload int) (ok, retry bool) {
	used, limit := int64(netstackunsafe.QueuedBytes(ep)), ep.SocketOptions().GetReceiveBufferSize()
	switch {
	case payload > 0:
		return used <= limit, false
	case ep.EndpointState() == tcp.StateListen:
		g := p.gate(ep)
		if used <= limit-listenDataReserve && g.allowNow() {
			return true, false
		}
		if used <= limit && p.refused.checkAndAdd(id, tcpHdr, payload) {
			return true, true
		}
		g.flooded(netstackunsafe.Nanotime())
		return false, false
	}
	return used <= limit+emptySegmentAllowance, false
}

// gate returns the floodGate of listener ep, nil if ep is not in the
// registry (it has just been removed).
func (p *tcpProtocol) gate(ep *tcp.Endpoint) *floodGate {
	if ls := p.listeners.Load(); ls != nil {
		for _, l := range *ls {
			if l.ep == ep {
				return l.gate
			}
		}
	}
	return nil
}

// floodGate is what a listener admits, beside retries, while it is flooded:
// from a refusal (its queue was full) until floodHold after the last one.
// The queue alone would let netstack's listener work as fast as segments
// come, and a flood's SYNs each cost a SYN cookie and a SYN-ACK written to
// the link (15 to 30 us here): that work took most of the CPU the link's
// reader needed, the kernel in front of it dropped half of what the reader
// could not read, and a real client's SYN dropped there is not remembered
// as refused, so its retransmission found no reserve either. Flooded, a
// listener takes at most floodAdmitRate first-time segments without payload
// a second (a token bucket of floodAdmitBurst); the rest are refused, and
// remembered (refusedSet), so that a real client's retransmission gets in.
// Segments with payload are not throttled. A nil *floodGate admits all.
type floodGate struct {
	// active is set while the listener may be flooded (until is in the
	// future or was when last looked at), so that a listener never
	// flooded costs its segments one atomic load: no lock, no clock.
	active atomic.Bool
	mu     sync.Mutex
	// until is when the listener stops being flooded (Nanotime).
	// +checklocks:mu
	until int64
	// credit is the bucket's content in ns of floodAdmitRate: one
	// segment costs 1e9/floodAdmitRate.
	// +checklocks:mu
	credit int64
	// +checklocks:mu
	last int64
	// cost is what one segment takes from the bucket (ns of credit) and
	// maxCredit what the bucket holds: floodAdmitRate and floodAdmitBurst,
	// which tests lower.
	// +checklocks:mu
	cost int64
	// +checklocks:mu
	maxCredit int64
}

func newFloodGate() *floodGate {
	return &floodGate{cost: 1e9 / floodAdmitRate, maxCredit: floodAdmitBurst * 1e9 / floodAdmitRate}
}

// allowNow is allow at the time now; it reads the clock only while the
// listener may be flooded.
func (g *floodGate) allowNow() bool {
	return g == nil || !g.active.Load() || g.allow(netstackunsafe.Nanotime())
}

// openNow is open at the time now, reading the clock as allowNow does.
func (g *floodGate) openNow() bool {
	return g == nil || !g.active.Load() || g.open(netstackunsafe.Nanotime())
}

// allow reports whether a first-time segment without payload may join the
// listener's queue, which has room, at now.
func (g *floodGate) allow(now int64) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now >= g.until {
		g.active.Store(false)
		return true
	}
	g.refill(now)
	if g.credit < g.cost {
		return false
	}
	g.credit -= g.cost
	return true
}

// open is allow without taking a token.
func (g *floodGate) open(now int64) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now >= g.until {
		g.active.Store(false)
		return true
	}
	g.refill(now)
	return g.credit >= g.cost
}

// refill adds the credit earned since the last call.
// +checklocks:g.mu
func (g *floodGate) refill(now int64) {
	g.credit = min(g.credit+now-g.last, g.maxCredit)
	g.last = now
}

// flooded records a refused segment at now: the listener is flooded for
// floodHold more. A listener that becomes flooded starts with a full
// bucket.
func (g *floodGate) flooded(now int64) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now >= g.until {
		g.credit, g.last = g.maxCredit, now
	}
	g.until = now + floodHold
	g.active.Store(true)
}

// refuse counts a segment admit refused.
func (p *tcpProtocol) refuse() {
	p.queueFull.Add(1)
	p.drops.Increment()
}

// refusedSet remembers, for at least the last second, the segments that a
// full listener queue refused, so that admit can tell a retransmission
// (the same segment again: a client's SYN after 1 s, its handshake ACK's
// follow-up data after its RTO) from the flood that filled the queue, whose
// segments each differ (hping3 changes the source port, spoofers the
// address). It is two generations of a Bloom filter (two bits a segment),
// the older forgotten when the newer has lived a second or taken
// refusedPerGeneration segments: 1 MiB, allocated on the first refusal.
// Sized so that a flood of up to 500,000 refused segments a second turns a
// generation over only each second: a client's SYN retransmitted a second
// later is then always remembered (with 128 KiB generations, a flood of
// 200,000 a second on a quiet machine turned them over every 0.65 s, and
// 28% of clients with a 2 s connect timeout failed). A false positive (about
// 1% of a flood at that rate) admits a flood segment as a retry; a
// retransmission seen after both generations turned over is refused again,
// and remembered.
type refusedSet struct {
	seed maphash.Seed // set when the protocol is made
	mu   sync.Mutex
	// +checklocks:mu
	gens [2]*[refusedBits / 64]uint64 // gens[cur] is the newer
	// +checklocks:mu
	cur int
	// +checklocks:mu
	n int // segments added to gens[cur]
	// +checklocks:mu
	born int64 // gens[cur]'s start, netstackunsafe.Nanotime
}

const (
	refusedBits          = 1 << 22
	refusedPerGeneration = refusedBits / 8 // each generation's filter is at most about a quarter full
)

// checkAndAdd reports whether the segment (for id, with header tcpHdr and
// payload bytes of payload) was refused lately,
// and remembers it as refused if not.
func (r *refusedSet) checkAndAdd(id gstack.TransportEndpointID, tcpHdr header.TCP, payload int) bool {
	var key [28]byte
	a := id.RemoteAddress.As4()
	copy(key[0:4], a[:])
	binary.LittleEndian.PutUint16(key[4:], id.RemotePort)
	binary.LittleEndian.PutUint16(key[6:], id.LocalPort)
	// Ports, sequence and acknowledgment numbers, offset, flags and
	// window: not the checksum, which a SYN's new timestamp changes.
	copy(key[8:24], tcpHdr)
	binary.LittleEndian.PutUint32(key[24:], uint32(payload))
	h := maphash.Bytes(r.seed, key[:])
	b1, b2 := h%refusedBits, (h>>32)%refusedBits
	now := netstackunsafe.Nanotime()

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gens[0] == nil {
		r.gens[0], r.gens[1] = new([refusedBits / 64]uint64), new([refusedBits / 64]uint64)
		r.born = now
	}
	for _, g := range r.gens {
		if g[b1/64]&(1<<(b1%64)) != 0 && g[b2/64]&(1<<(b2%64)) != 0 {
			return true
		}
	}
	if r.n >= refusedPerGeneration || now-r.born > 1e9 {
		r.cur ^= 1
		clear(r.gens[r.cur][:])
		r.n, r.born = 0, now
	}
	g := r.gens[r.cur]
	g[b1/64] |= 1 << (b1 % 64)
	g[b2/64] |= 1 << (b2 % 64)
	r.n++
	return false
}

// QueuePacket implements netstack's queued transport protocol interface.
// +checklocksignore: TryLock, which checklocks cannot follow.
func (p *tcpProtocol) QueuePacket(ep gstack.TransportEndpoint, id gstack.TransportEndpointID, pkt *gstack.PacketBuffer) {
	tep, ok := ep.(*tcp.Endpoint)
	if !ok {
		p.queue.QueuePacket(ep, id, pkt)
		return
	}
	rx := p.rx.get(pkt)
	if rx == 0 {
		rx = rxclock.Now() // the stash was full
	}
	sy := p.sy
	if sy == nil {
		if p.handOff(tep, id, pkt, rx) || p.deferProcessing(tep, id, pkt, rx) {
			return
		}
	} else if netstackunsafe.Connected(tep.EndpointState()) && sy.delivering.Load() != 0 && sy.inlineAllowed() && netstackunsafe.TryLock(tep) {
		p.queueLocked(tep, id, pkt, rx)
		return
	}
	if p.admit(tep, id, pkt.TransportHeader().Slice(), pkt.Data().Size()) {
		if pkt.Data().Size() > 0 {
			p.conns.stamp(tep, rx)
		}
		p.queue.QueuePacket(ep, id, pkt)
	}
}

// handOff queues pkt, a segment received at rx, for the reader or writer
// of tep's connection that waits for it (stock mode, see handoff.go and
// TCPConn.handTarget), reporting false, having done nothing, when the segment must
// go the stock way.
// +checklocksignore: TryLock, which checklocks cannot follow.
func (p *tcpProtocol) handOff(tep *tcp.Endpoint, id gstack.TransportEndpointID, pkt *gstack.PacketBuffer, rx int64) bool {
	c := p.conns.find(tep)
	if c == nil || c.handEP != tep {
		return false
	}
	h, ch := c.handTarget(pkt.Data().Size())
	if h == nil || !netstackunsafe.Connected(tep.EndpointState()) || !netstackunsafe.TryLock(tep) {
		return false
	}
	p.queueHeld(tep, id, pkt, rx)
	c.give(h, tep, ch)
	return true
}

// deferProcessing queues pkt, a segment received at rx, to tep without
// waking a processor, for the wire to process on this goroutine once
// netstack's inbound path has returned (wire.processDeferred), when the
// stack processes segments inline (p.inline) and a goroutine waits for
// what the segment brings: any segment for a listener that is not flooded
// (floodGate: an Accept waits for the handshake it completes), for a
// handshake (a dial waits), and a FIN without payload for an established
// connection (a Read may wait for the end of the stream). It reports
// false, having done nothing, when the segment must go the stock way (or
// to a waiting Read, handOff).
//
// Over link/pipe both stacks are in the process, and the delivering
// goroutine is the peer's sender: processing there, as Linux processes a
// loopback segment in the sender's softirq, saves the processor wake-up
// netstack spends on each of them. What nobody waits for (the rest of a
// teardown once the program has closed: FIN-WAIT, LAST-ACK, TIME-WAIT)
// stays on netstack's processors, which run beside the sender instead of
// delaying it; so does a connection's data (see handoff.go).
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func (p *tcpProtocol) deferProcessing(tep *tcp.Endpoint, id gstack.TransportEndpointID, pkt *gstack.PacketBuffer, rx int64) bool {
	if !p.inline {
		return false
	}
	switch st := tep.EndpointState(); st {
	case tcp.StateEstablished:
		if pkt.Data().Size() > 0 || header.TCP(pkt.TransportHeader().Slice()).Flags()&header.TCPFlagFin == 0 {
			return false
		}
	case tcp.StateListen:
		if g := p.gate(tep); g != nil && g.active.Load() {
			return false // flooded: the work stays on netstack's processors
		}
	case tcp.StateSynSent, tcp.StateSynRecv:
	default:
		return false
	}
	if !netstackunsafe.TryLock(tep) {
		return false // held: its holder hands the segment on
	}
	p.queueHeld(tep, id, pkt, rx)
	if !p.rx.deferTo(pkt, tep) {
		netstackunsafe.Kick(tep) // no slot: the stash was full
	}
	return true
}

// queueHeld queues pkt, received at rx, to tep, whose lock the caller took
// with netstackunsafe.TryLock, without waking a processor, and releases the
// lock: the caller must then have the queue processed (or Kick it).
// +checklocksignore: TryLock, which checklocks cannot follow.
func (p *tcpProtocol) queueHeld(tep *tcp.Endpoint, id gstack.TransportEndpointID, pkt *gstack.PacketBuffer, rx int64) {
	owned := netstackunsafe.OwnedByUser(tep)
	owned.Store(1)
	if p.admit(tep, id, pkt.TransportHeader().Slice(), pkt.Data().Size()) {
		if pkt.Data().Size() > 0 {
			p.conns.stamp(tep, rx)
		}
		p.queue.QueuePacket(tep, id, pkt) // checks, counts and queues the segment; wakes nobody
	}
	owned.Store(0)
	tep.ResumeWork() // releases the lock taken by TryLock
}

// queueLocked queues pkt, received at rx, to tep, whose lock the caller
// took with netstackunsafe.TryLock, without waking a processor, releases
// the lock and records tep for processing at the end of the delivery.
// Latency mode only.
// +checklocksignore: TryLock, which checklocks cannot follow.
func (p *tcpProtocol) queueLocked(tep *tcp.Endpoint, id gstack.TransportEndpointID, pkt *gstack.PacketBuffer, rx int64) {
	p.queueHeld(tep, id, pkt, rx)
	if !p.sy.record(tep) {
		p.sy.fallbacks.Add(1)
		netstackunsafe.Kick(tep)
	}
}

// listenerPort is a TCP listener, its port and its floodGate.
type listenerPort struct {
	port uint16
	ep   *tcp.Endpoint
	gate *floodGate
}

// addListener lets refuseEarly screen segments for ep, listening on port.
func (p *tcpProtocol) addListener(port uint16, ep *tcp.Endpoint) {
	p.listenersMu.Lock()
	defer p.listenersMu.Unlock()
	var ls []listenerPort
	if old := p.listeners.Load(); old != nil {
		ls = append(ls, (*old)...)
	}
	ls = append(ls, listenerPort{port, ep, newFloodGate()})
	p.listeners.Store(&ls)
}

// removeListener undoes addListener.
func (p *tcpProtocol) removeListener(ep *tcp.Endpoint) {
	p.listenersMu.Lock()
	defer p.listenersMu.Unlock()
	old := p.listeners.Load()
	if old == nil {
		return
	}
	ls := make([]listenerPort, 0, len(*old))
	for _, l := range *old {
		if l.ep != ep {
			ls = append(ls, l)
		}
	}
	p.listeners.Store(&ls)
}

// refuseEarly applies admit, before netstack's IPv4 layer and
// demultiplexer, to a TCP segment (IPv4 header ip, TCP header tcpHdr,
// payload bytes of payload) for a listener whose queue is past the part
// open to all, or whose floodGate is closed: under a flood, a refused segment then costs the wire's
// screening and one demultiplexer lookup instead of netstack's whole
// inbound path, which lets the link's reader keep up with more of the
// flood, and the kernel (or NIC) in front of it drop less of what real
// clients send. It reports whether it refused (and counted) the segment.
// Segments for ports without a listener, and any segment while no
// listener's queue is that full or flooded, cost a load, a short loop and,
// for a listener's port, a lock.
func (p *tcpProtocol) refuseEarly(ip header.IPv4, tcpHdr header.TCP, payload int) bool {
	ls := p.listeners.Load()
	if ls == nil {
		return false
	}
	port := tcpHdr.DestinationPort()
	for _, l := range *ls {
		if l.port != port {
			continue
		}
		if int64(netstackunsafe.QueuedBytes(l.ep)) <= l.ep.SocketOptions().GetReceiveBufferSize()-listenDataReserve &&
			l.gate.openNow() {
			return false
		}
		id := gstack.TransportEndpointID{
			LocalPort: port, LocalAddress: ip.DestinationAddress(),
			RemotePort: tcpHdr.SourcePort(), RemoteAddress: ip.SourceAddress(),
		}
		// A connection's or handshake's segment is not the listener's.
		if ep := p.st.FindTransportEndpoint(ipv4.ProtocolNumber, tcp.ProtocolNumber, id, nicID); ep != gstack.TransportEndpoint(l.ep) {
			return false
		}
		// A retry is left to count when it reaches QueuePacket.
		if ok, _ := p.decide(l.ep, id, tcpHdr, payload); !ok {
			p.refuse()
			return true
		}
		return false
	}
	return false
}
