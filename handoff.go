package tickwire

import (
	"runtime"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip/header/parse"
	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
)

// Reader hand-off, in stock mode: a segment with payload for a connection
// whose reader is blocked in Read is queued without waking netstack's
// processor, and the reader is woken directly; it runs netstack's TCP
// processing for the segment itself (netstackunsafe.Process) before it
// reads. Stock netstack wakes a processor goroutine, which processes the
// segment and then wakes the reader: two wake-ups where the hand-off costs
// one. The ACK for what the reader processed waits until its read has
// copied the data out, so that one ACK carries both it and the window
// the read opened; after that it is owed, as latency mode owes it,
// unless more than one full segment is unacknowledged: the
// program's answer (its next Write) carries it, or the timer of the
// wire's owed list sends it within 1 ms; a Read that frees most of the
// window announces it at once (afterHandoffRead). Why a pure ACK is worth
// saving: DESIGN.md.
//
// A segment handed over also skips netstack's network layer (direct TCP
// delivery, tcpdirect.go), as in latency mode: the wire finds the
// connection by its flow and queues the segment itself.
//
// Nothing else changes: the delivering goroutine (the link's reader, the
// writer on the other end of link/pipe) still only queues, the processing
// runs on the connection's own goroutine (so many connections still
// process in parallel), and every segment that finds no reader waiting,
// finds the endpoint busy, or carries no payload (a pure ACK, from which
// a reader has nothing to read) goes to netstack's processors as before,
// unless a Write waits (below). Latency mode (syncer.go) goes further and
// is unaffected: its Reads and Writes never wait in hand-off.
//
// A stock-mode handler's goroutine waits in the reader's hand-off between
// drains (handedReceiveLoop); a deliverer yields past handYieldAt (give).
//
// Writer hand-off is the same for a Write that waits for send-buffer
// space: any segment of its connection (the ACK that frees the space, a
// window update) is queued without waking a processor and the writer
// processes it, sending what the ACK lets it send. A segment with payload
// goes to a waiting reader first (handTarget). The
// delivering goroutine still only queues: a link reader shared by many
// connections does no TCP work for any of them.

// Hand-off states of a connection's reader or writer.
const (
	handIdle    = iota // nobody waiting: segments go to netstack's processors
	handWaiting        // blocked (or about to block); processes what it is given
	handGiven          // a segment was queued for the waiter, which must process it
)

// handoff is the hand-off state of one connection's reader (or writer).
// Only the goroutine in Read (under TCPConn.readMu; a handler's receive
// loop, which has no Read; Write, under writeMu) moves it out of handIdle
// and back; a deliverer moves it from handWaiting to handGiven.
type handoff struct {
	state atomic.Int32
	// given counts the segments handed over, for tests.
	given atomic.Uint64
}

// waiting reports whether a Read (Write) waits to be handed segments.
func (h *handoff) waiting() bool { return h.state.Load() == handWaiting }

// give hands ep, holding a segment queued without waking a processor, to
// c's waiting reader (writer) h and wakes it through ch (its readCh,
// writeCh), or, when it stopped waiting meanwhile, hands the segment to a
// processor as netstack would have. Past handYieldAt segments handed out
// and not yet processed on c's stack, it yields the processor to the
// goroutines it woke.
func (c *TCPConn) give(h *handoff, ep *tcp.Endpoint, ch chan struct{}) {
	if !h.state.CompareAndSwap(handWaiting, handGiven) {
		netstackunsafe.Kick(ep)
		return
	}
	h.given.Add(1)
	out := c.s.wire.handsOut.Add(1)
	signal(ch)
	if out > handYieldAt {
		runtime.Gosched()
	}
}

// waitRead is sock.wait for a Read that found nothing to read (stop nil:
// data, the read deadline or Close end it) or for a handler's goroutine
// (stop: the Stack's done): in stock mode, it waits in hand-off and
// processes what it was given once it wakes, for whatever reason, so that
// a segment handed over is never left in the queue.
func (c *TCPConn) waitRead(stop <-chan struct{}) {
	c.waitHanded(&c.hand, c.readCh, stop)
}

// waitWrite is sock.wait for a Write that found the send buffer full: the
// writer's side of the hand-off (see handTarget).
func (c *TCPConn) waitWrite() {
	c.waitHanded(&c.whand, c.writeCh, nil)
}

// waitHanded waits on ch in hand-off h (the reader's or the writer's) and
// processes what h was given, for whatever reason the wait ended.
func (c *TCPConn) waitHanded(h *handoff, ch, stop <-chan struct{}) {
	if c.handEP == nil {
		c.wait(ch, stop)
		return
	}
	h.state.Store(handWaiting)
	c.wait(ch, stop)
	if h.state.Swap(handIdle) != handGiven {
		return
	}
	c.s.wire.handsOut.Add(-1)
	// If the endpoint is busy, its holder took it after the segment was
	// queued and hands the queue on when it lets go.
	if h == &c.hand {
		// The reader reads next: its ACK waits until then, so that one
		// ACK carries both it and the window the read opens
		// (afterHandoffRead) instead of one each.
		if netstackunsafe.Process(c.handEP, noACK) {
			c.ackDue = true
		}
		return
	}
	c.oweACK(netstackunsafe.Process(c.handEP, seqnum.Size(c.s.wire.mss)))
}

// noACK is a Process threshold no unacknowledged count reaches: the ACK is
// always left owed.
const noACK = seqnum.Size(^uint32(0))

// oweACK puts c's endpoint on the wire's owed list when owed, or sends the
// ACK at once when the list is full (or closing).
func (c *TCPConn) oweACK(owed bool) {
	if owed && !c.s.wire.owed.owe(c.handEP) {
		netstackunsafe.SettleACK(c.handEP)
	}
}

// afterHandoffRead runs after every netstack read of a Read in hand-off;
// read says it returned data. It announces the window a read opened, as
// syncer.afterRead does in latency mode (that ACK carries any owed one),
// and otherwise settles the ACK that the reader's processing deferred
// (waitRead): sent when more than a segment is unacknowledged, as Process
// would have sent it, else owed.
func (c *TCPConn) afterHandoffRead(read bool) {
	if c.handEP == nil {
		return
	}
	mss := seqnum.Size(c.s.wire.mss)
	if read && netstackunsafe.UpdateWindow(c.handEP, mss) {
		c.ackDue = false
		return
	}
	if !c.ackDue {
		return
	}
	c.ackDue = false
	owed, ok := netstackunsafe.SettleACKOver(c.handEP, mss)
	c.oweACK(owed || !ok) // busy: the timer settles it
}

// handOffTCP hands pkt, an IPv4 packet whose header checksum was checked,
// straight to the waiting Read of its connection, past netstack's network
// layer (as direct TCP delivery does in latency mode, tcpdirect.go), when
// it carries payload for a connection the program holds; false, having
// done nothing, otherwise.
//
// +checklocksignore: lockFound's TryLock, which checklocks cannot follow.
func (w *wire) handOffTCP(pkt *gstack.PacketBuffer, rx int64) bool {
	if w.tcp == nil {
		return false
	}
	ep, ip, seg, payload := w.flows.find(pkt, w.addr)
	if ep == nil {
		return false
	}
	c := w.tcp.conns.find(ep)
	if c == nil || c.handEP != ep {
		return false
	}
	h, ch := c.handTarget(payload)
	if h == nil {
		return false
	}
	ep, id := lockFound(ep, ip, seg, w.addr)
	if ep == nil {
		return false
	}
	if !parse.IPv4(pkt) || !parse.TCP(pkt) {
		netstackunsafe.Unlock(ep)
		return true // unreachable (see tcpFlows.claim); pkt may be half parsed, so netstack must not see it
	}
	pkt.RXChecksumValidated = w.rxChecksummed
	w.counters.tcpDirect.Add(1)
	w.tcp.queueHeld(ep, id, pkt, rx)
	c.give(h, ep, ch)
	return true
}

// handYieldAt bounds the segments handed over and not yet processed, per
// stack, before the delivering goroutine yields its processor to the
// goroutines it woke. A goroutine delivering for thousands of connections
// (the writer on the other end of link/pipe, a link's reader) otherwise
// wakes readers faster than they run: hundreds wait in the run queues, and
// each finds its connection's state and data gone from the cache, and its
// ACK late, when it runs. Yielding costs the deliverer a trip through the
// global run queue; with fewer than 32 outstanding it never happens (one
// connection's round trips, a few busy ones).
const handYieldAt = 32

// handTarget returns the hand-off that a segment for c carrying payload
// bytes goes to, and the channel that wakes its goroutine; nil when the
// segment must go to netstack's processor. A segment with payload goes to
// a waiting Read; any segment (an ACK that frees send-buffer space, a
// window update, data no Read waits for) goes to a Write waiting for
// room, which would otherwise be woken by the processor that handled it.
func (c *TCPConn) handTarget(payload int) (*handoff, chan struct{}) {
	if payload > 0 && c.hand.waiting() {
		return &c.hand, c.readCh
	}
	if c.whand.waiting() {
		return &c.whand, c.writeCh
	}
	return nil, nil
}
