package tickwire

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// maxOutbox bounds the frames an outbox holds; beyond it frames go out at
// once (Stats.LatencyOutboxFull).
const maxOutbox = 1024

// ackFlows is the size of the delayed-ACK flow table: a power of two, so
// that a flow's slot is its hash's low bits. A flow whose slot another flow
// takes loses its state (Stats.LatencyACKFlowEvictions): its held ACK leaves
// at once and its next ACK is not delayed.
const ackFlows = 256

// ackDelayTick is the period of the delayed-ACK timer. An ACK held during
// one tick leaves at the end of the next at the latest: at most two ticks
// (1 ms) after netstack wrote it, far below any retransmission or loss-probe
// timeout (netstack's and Linux's shortest are 10 ms and more), and 40 times
// shorter than Linux's own minimum delayed-ACK time.
const ackDelayTick = 500 * time.Microsecond

// outbox holds, in latency mode, the frames written while tickwire is inside
// a netstack call that holds a TCP endpoint (a Read, a Write, synchronous
// processing and the handler run after it), and sends them when the call
// has returned. Over link/pipe the answer to a frame arrives on the sending
// goroutine before the send returns; sent from inside the call, it would
// find the endpoint held, be queued, and cost a processor wake-up when the
// call let go. Frames keep their order: while frames wait or a flush runs,
// every frame waits.
//
// The outbox also delays ACKs, as a TCP with delayed acknowledgements does
// (RFC 1122 4.2.3.2, RFC 9293 3.8.6.3): netstack sends a pure ACK for every
// segment it processes at once. A pure, in-order ACK that acknowledges new
// data is held, at most two ackDelayTick periods, in the table of its flow;
// the next segment of the same connection that acknowledges as much (the
// handler's answer, the program's next request, another ACK) replaces it,
// since ACKs are cumulative (Stats.LatencyACKsMerged). A request/reply
// exchange then costs two segments instead of three or four. Never held:
// ACKs with options (SACK blocks) or another flag (SYN, FIN, RST, PSH), and
// ACKs that acknowledge nothing new (duplicate ACKs, which drive the peer's
// fast retransmit, and window updates). Not delayed past the flush they are
// written in, though still replaced by a segment behind them in it: an ACK
// that advertises a zero window or follows one (the window update that
// restarts a stalled sender), one whose window field is larger than the
// connection's previous segment's (it announces a read that opened the
// window, see syncer.afterRead: the sender may be waiting for it), one that would leave more than one full
// segment (Config.MSS) unacknowledged, and the second for a flow that
// already has one held, which replaces the first: a bulk sender sees an ACK
// for every other segment, as from Linux. The same timer settles the ACKs
// that synchronous processing left owed (see netstackunsafe.Process and owe): each is
// sent if no segment has carried it after a whole tick.
//
// Lock order:
//
//	outbox.mu
type outbox struct {
	w   *wire
	mss uint32

	mu sync.Mutex
	// +checklocks:mu
	holds int // calls in progress
	// +checklocks:mu
	flushing bool // a goroutine is sending the queued frames
	// +checklocks:mu
	closed bool
	// +checklocks:mu
	q []*gstack.PacketBuffer // queued frames, each with its own reference
	// +checklocks:mu
	flows [ackFlows]ackFlow
	// +checklocks:mu
	nheld int // flows with a held ACK
	// +checklocks:mu
	batch []int // slots of the flows whose ACK is held for this batch only
	// +checklocks:mu
	tick uint32 // delayed-ACK timer ticks so far
	// +checklocks:mu
	armed bool // timer is set
	// +checklocks:mu
	owed  []owedACK // endpoints whose ACK netstack was not let send (see netstackunsafe.Process)
	timer *time.Timer

	// spare and sending are the flusher's (only the goroutine that set
	// flushing touches them).
	spare   []*gstack.PacketBuffer
	sending gstack.PacketBufferList

	full, merged, held, expired, evicted atomic.Uint64
	// internal counts the sends in progress that come from outside any
	// tickwire call (see send).
	internal atomic.Int32
}

// ackFlow is the delayed-ACK state of one TCP connection, seen from the
// segments this stack sends on it.
type ackFlow struct {
	key  flowKey
	used bool
	// acked: lastACK and lastWnd are known (a segment with ACK was seen).
	acked   bool
	lastACK seqnum.Value // of the latest segment with ACK netstack wrote
	sentACK seqnum.Value // of the latest segment with ACK that left
	lastWnd uint16       // window field of that latest segment
	heldACK seqnum.Value
	heldAt  uint32               // tick when held
	held    *gstack.PacketBuffer // the delayed ACK, with its own reference
	// batchOnly: held is not delayed, only kept to the end of the batch
	// being classified, in case a segment behind it carries it.
	batchOnly bool
	// handshake: the flow has sent only SYNs (a SYN-ACK that may never
	// become a connection): losing its slot is not counted as an eviction.
	handshake bool
}

// owedACK is an endpoint whose ACK has been owed since tick since.
type owedACK struct {
	ep    *tcp.Endpoint
	since uint32
}

// maxOwed bounds the endpoints with an owed ACK; beyond it an ACK is sent
// at once.
const maxOwed = 256

// owe records that ep owes its peer an ACK, to be sent at the timer's next
// tick but one unless a segment carries it first; false when the list is
// full.
func (o *outbox) owe(ep *tcp.Endpoint) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	for i := range o.owed {
		if o.owed[i].ep == ep {
			return true // owed since then: the deadline stands
		}
	}
	if len(o.owed) == maxOwed {
		return false
	}
	o.owed = append(o.owed, owedACK{ep: ep, since: o.tick})
	o.held.Add(1)
	o.armLocked()
	return true
}

// armLocked sets the timer if something waits for it.
//
// +checklocks:o.mu
func (o *outbox) armLocked() {
	if (o.nheld > 0 || len(o.owed) > 0) && !o.armed && !o.closed {
		o.armed = true
		o.timer.Reset(ackDelayTick)
	}
}

func newOutbox(w *wire, mss int) *outbox {
	o := &outbox{w: w, mss: uint32(mss), batch: make([]int, 0, maxOutbox), owed: make([]owedACK, 0, maxOwed)}
	o.timer = time.AfterFunc(time.Hour, o.expire)
	o.timer.Stop()
	return o
}

// send passes pkts to the link now, or queues them (see outbox). A send
// outside any tickwire call (holds == 0) comes from netstack's own
// goroutines (processors, timers), which may hold netstack locks, such as a
// listener's while it answers a SYN; over link/pipe the peer's answer comes
// back on this goroutine before the send returns, so while such a send is
// in progress (internal) the syncer processes nothing synchronously.
func (o *outbox) send(pkts gstack.PacketBufferList) (int, tcpip.Error) {
	o.mu.Lock()
	if o.holds == 0 && !o.flushing && len(o.q) == 0 && !hasTCP(pkts) {
		o.mu.Unlock()
		return o.sendInternal(pkts)
	}
	if len(o.q)+pkts.Len() > maxOutbox {
		o.mu.Unlock()
		o.full.Add(1)
		return o.sendInternal(pkts)
	}
	for _, pkt := range pkts.AsSlice() {
		o.q = append(o.q, pkt.IncRef())
	}
	if o.holds > 0 || o.flushing {
		o.mu.Unlock()
		return pkts.Len(), nil
	}
	o.internal.Add(1)
	err := o.flushLocked()
	o.internal.Add(-1)
	return pkts.Len(), err
}

// sendInternal passes pkts to the link at once, counted as internal.
func (o *outbox) sendInternal(pkts gstack.PacketBufferList) (int, tcpip.Error) {
	o.internal.Add(1)
	defer o.internal.Add(-1)
	return o.w.Endpoint.WritePackets(pkts)
}

func hasTCP(pkts gstack.PacketBufferList) bool {
	for _, pkt := range pkts.AsSlice() {
		if pkt.TransportProtocolNumber == header.TCPProtocolNumber {
			return true
		}
	}
	return false
}

// hold marks the start of a netstack call whose frames must wait. A nil
// outbox (latency mode off) holds nothing.
func (o *outbox) hold() {
	if o != nil {
		o.mu.Lock()
		o.holds++
		o.mu.Unlock()
	}
}

// release marks the end of such a call and sends the queued frames, unless
// another goroutine is already sending them (it sends these too).
func (o *outbox) release() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.holds--
	if o.flushing || len(o.q) == 0 {
		o.mu.Unlock()
		return
	}
	o.flushLocked()
}

// flushLocked sends the queued frames, and those queued while it sends
// (frames written by the stack that the link delivers to inline), delaying
// the ACKs that may be. It returns the first error of the link, which
// counts its own drops.
//
// +checklocksrelease:o.mu
func (o *outbox) flushLocked() tcpip.Error {
	o.flushing = true
	var first tcpip.Error
	for len(o.q) > 0 {
		batch := o.q
		o.q = o.spare[:0]
		for _, pkt := range batch {
			o.classifyLocked(pkt) // the reference goes to o.sending or a flow
		}
		o.endBatchLocked()
		clear(batch)
		o.spare = batch[:0]
		o.armLocked()
		o.mu.Unlock()
		if o.sending.Len() > 0 {
			if _, err := o.w.Endpoint.WritePackets(o.sending); err != nil && first == nil {
				first = err
			}
			o.sending.Reset() // drops the queued references
		}
		o.mu.Lock()
	}
	o.flushing = false
	o.mu.Unlock()
	return first
}

// classifyLocked moves pkt, with the reference the queue held, to the
// frames to send now, or to its flow as the flow's delayed ACK.
//
// +checklocks:o.mu
func (o *outbox) classifyLocked(pkt *gstack.PacketBuffer) {
	if pkt.TransportProtocolNumber != header.TCPProtocolNumber {
		o.sending.PushBack(pkt)
		return
	}
	ip, tcp := header.IPv4(pkt.NetworkHeader().Slice()), header.TCP(pkt.TransportHeader().Slice())
	if len(ip) < header.IPv4MinimumSize || len(tcp) < header.TCPMinimumSize {
		o.sending.PushBack(pkt)
		return
	}
	key := segmentFlow(ip, tcp)
	slot := key.slot()
	f := &o.flows[slot]
	flags := tcp.Flags()
	if f.used && f.key != key && flags&(header.TCPFlagSyn|header.TCPFlagRst) != 0 {
		// A SYN-ACK or a RST never delays an ACK: it leaves without taking
		// the slot from the connection that has it (under a SYN or ACK
		// flood, each SYN-ACK or RST names a new flow).
		o.sending.PushBack(pkt)
		return
	}
	if !f.used || f.key != key {
		if f.used && !f.handshake {
			o.evicted.Add(1)
		}
		o.dropFlowLocked(f, true)
		*f = ackFlow{key: key, used: true}
	}
	f.handshake = flags&header.TCPFlagSyn != 0 && (f.handshake || !f.acked)
	ack := seqnum.Value(tcp.AckNumber())
	hasACK := flags&header.TCPFlagAck != 0
	superseded := false
	if f.held != nil {
		if hasACK && !ack.LessThan(f.heldACK) {
			superseded = true
			o.merged.Add(1)
		}
		o.dropFlowLocked(f, !superseded)
	}
	if !hasACK {
		o.sending.PushBack(pkt)
		return
	}
	wnd := tcp.WindowSize()
	if f.acked && f.lastACK.LessThan(ack) && flags == header.TCPFlagAck && tcp.DataOffset() == header.TCPMinimumSize &&
		pkt.Data().Size() == 0 {
		// A pure ACK of new data: held to the end of the batch at least,
		// where a segment behind it may carry it.
		f.batchOnly = superseded || uint32(f.sentACK.Size(ack)) > o.mss || wnd == 0 || f.lastWnd == 0 || wnd > f.lastWnd
		f.held, f.heldACK, f.heldAt = pkt, ack, o.tick
		f.lastACK, f.lastWnd = ack, wnd
		o.nheld++
		if f.batchOnly {
			o.batch = append(o.batch, slot)
		} else {
			o.held.Add(1)
		}
		return
	}
	f.acked, f.lastACK, f.sentACK, f.lastWnd = true, ack, ack, wnd
	if flags&(header.TCPFlagFin|header.TCPFlagRst) != 0 {
		f.used = false // what the connection sends from now on is not delayed
	}
	o.sending.PushBack(pkt)
}

// endBatchLocked sends the ACKs held only for the batch just classified.
//
// +checklocks:o.mu
func (o *outbox) endBatchLocked() {
	for _, slot := range o.batch {
		if f := &o.flows[slot]; f.held != nil && f.batchOnly {
			o.dropFlowLocked(f, true)
		}
	}
	o.batch = o.batch[:0]
}

// dropFlowLocked lets go of f's held ACK: to the frames to send when send is
// true, else released.
//
// +checklocks:o.mu
func (o *outbox) dropFlowLocked(f *ackFlow, send bool) {
	if f.held == nil {
		return
	}
	if send {
		f.sentACK = f.heldACK
		o.sending.PushBack(f.held)
	} else {
		o.w.uncountTx(f.held)
		f.held.DecRef()
	}
	f.held = nil
	o.nheld--
}

// expire runs on the delayed-ACK timer: it queues the ACKs held for a whole
// tick and sends them, unless a call in progress or another flusher will,
// then has the endpoints that owed an ACK for a whole tick send it if
// nothing carried it meanwhile.
func (o *outbox) expire() {
	o.mu.Lock()
	o.armed = false
	if o.closed {
		o.mu.Unlock()
		return
	}
	for i := range o.flows {
		f := &o.flows[i]
		if f.held != nil && f.heldAt != o.tick {
			o.q = append(o.q, f.held) // the queue takes over the reference
			f.held = nil
			o.nheld--
			o.expired.Add(1)
			// f.lastACK is the held ACK's own: classifyLocked sends it.
		}
	}
	var due [maxOwed]*tcp.Endpoint
	n, kept := 0, 0
	for _, a := range o.owed {
		if a.since != o.tick {
			due[n] = a.ep
			n++
		} else {
			o.owed[kept] = a
			kept++
		}
	}
	clear(o.owed[kept:])
	o.owed = o.owed[:kept]
	o.tick++
	if o.holds > 0 || o.flushing || len(o.q) == 0 {
		o.armLocked()
		o.mu.Unlock()
	} else {
		o.flushLocked()
		o.mu.Lock()
		o.armLocked()
		o.mu.Unlock()
	}
	for _, ep := range due[:n] {
		switch sent, ok := netstackunsafe.SettleACK(ep); {
		case !ok:
			o.owe(ep) // busy: next tick
		case sent:
			o.expired.Add(1)
		default:
			o.merged.Add(1)
		}
	}
}

// close drops the queued and held frames and stops the timer (at the
// Stack's Close). A nil outbox has nothing to drop.
func (o *outbox) close() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.closed = true
	o.timer.Stop()
	for i, pkt := range o.q {
		o.w.uncountTx(pkt)
		pkt.DecRef()
		o.q[i] = nil
	}
	o.q = o.q[:0]
	for i := range o.flows {
		if f := &o.flows[i]; f.held != nil {
			o.w.uncountTx(f.held)
			f.held.DecRef()
			f.held = nil
		}
	}
	o.nheld = 0
	clear(o.owed)
	o.owed = o.owed[:0]
	o.mu.Unlock()
}
