package tickwire

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip/seqnum"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
)

// Latency mode (Config.Latency) in brief. A TCP round trip through stock
// netstack costs four goroutine wake-ups: on each side, the processor
// goroutine that netstack queues every inbound segment to, then the reader
// that the processor notifies. Latency mode removes them:
//
//   - tcpProtocol replaces netstack's queueing of a segment for an established
//     connection by "queue without waking anyone" (the endpoint is marked as
//     owned, as netstack does while a program's call holds it) and records
//     the endpoint with the syncer;
//   - the wire, once netstack's inbound path has returned (and released its
//     demultiplexer lock), has the syncer process the recorded endpoints on
//     the delivering goroutine, exactly as a processor would, then run their
//     OnReceive handlers;
//   - a Read or Write that finds segments queued while it held the
//     connection processes them itself instead of leaving them to the
//     processor that netstack has just woken, and a Read or Write that would
//     block spins (runtime.Gosched, so that whatever it waits for can run on
//     the same P) for up to Config.BusyPoll before it sleeps;
//   - the processing does not let netstack send the ACK for the segments
//     it processed (netstackunsafe.Process): the ACK is owed, carried by the
//     handler's answer or the connection's next segment, or sent by the
//     outbox's delayed-ACK timer within 1 ms; while a Read runs, it waits
//     for that Read, whose window update carries it (readDone); ACKs
//     netstack sends anyway are delayed and merged by the outbox (see
//     outbox).
//
// Whatever cannot go the synchronous way (the endpoint is busy, the
// connection is not established, the pending list is full) goes the stock
// way, through netstack's processors: latency mode changes who runs TCP and
// when, never what TCP does.

// maxPending bounds the endpoints recorded for processing by deliveries in
// progress; beyond it, segments go to netstack's processors.
const maxPending = 64

// syncer runs latency mode's synchronous processing for one Stack.
//
// Lock order:
//
//	syncer.mu
type syncer struct {
	wire *wire        // set by newWire
	tcp  *tcpProtocol // set when the stack builds its TCP protocol
	// delivering counts the wire deliveries in progress; an endpoint is
	// recorded only while one is, and each delivery processes the recorded
	// endpoints before it counts itself out, so none is left behind.
	delivering atomic.Int32
	mu         sync.Mutex
	// +checklocks:mu
	pending []*tcp.Endpoint // at most maxPending

	// handlers maps the endpoints of connections with an OnReceive handler
	// to their *TCPConn; nhandlers lets the common case skip the lookup.
	handlers  sync.Map
	nhandlers atomic.Int32

	processed, fallbacks, inline atomic.Uint64

	// clock is netstack's clock stamp (clock.go): frozen from a TCP
	// segment's direct delivery (tcpdirect.go) until a handler runs or the
	// delivery ends.
	clock clockStamp
}

// stamp returns sy's clock stamp; nil, never frozen, for a nil syncer.
func (sy *syncer) stamp() *clockStamp {
	if sy == nil {
		return nil
	}
	return &sy.clock
}

func newSyncer() *syncer {
	sy := &syncer{}
	sy.pending = make([]*tcp.Endpoint, 0, maxPending)
	return sy
}

// inlineAllowed reports whether segments may be processed on the
// delivering goroutine: not while a send from one of netstack's own
// goroutines is in progress (see outbox.send), since this delivery may be
// nested in it, and the processing may need a lock that goroutine holds.
func (sy *syncer) inlineAllowed() bool {
	return sy.wire.out.internal.Load() == 0
}

// begin counts a wire delivery in.
func (sy *syncer) begin() {
	sy.mu.Lock()
	sy.delivering.Add(1)
	sy.mu.Unlock()
}

// record adds ep to the endpoints to process, reporting false when no
// delivery is in progress or the list is full.
func (sy *syncer) record(ep *tcp.Endpoint) bool {
	sy.mu.Lock()
	defer sy.mu.Unlock()
	if sy.delivering.Load() == 0 {
		return false
	}
	for _, p := range sy.pending {
		if p == ep {
			return true
		}
	}
	if len(sy.pending) == cap(sy.pending) {
		return false
	}
	sy.pending = append(sy.pending, ep)
	return true
}

// finish processes the recorded endpoints, then counts the delivery out.
// It runs on the delivering goroutine after netstack's inbound path
// returned, so no netstack lock is held. frozen says that the delivery
// froze the clock; it is thawed before a handler runs, and at the end.
func (sy *syncer) finish(frozen bool) {
	defer func() { sy.clock.thaw(frozen) }()
	var batch [16]*tcp.Endpoint
	for {
		sy.mu.Lock()
		n := copy(batch[:], sy.pending)
		if n == 0 {
			sy.delivering.Add(-1)
			sy.mu.Unlock()
			return
		}
		rest := copy(sy.pending, sy.pending[n:])
		clear(sy.pending[rest:])
		sy.pending = sy.pending[:rest]
		sy.mu.Unlock()
		inline := sy.inlineAllowed()
		for i := range n {
			if inline {
				sy.process(batch[i], &frozen)
			} else {
				netstackunsafe.Kick(batch[i]) // to a processor: see inlineAllowed
			}
			batch[i] = nil
		}
	}
}

// process runs netstack's TCP processing for ep on this goroutine, then the
// connection's OnReceive handler if the processing made it readable. When
// *frozen, this goroutine froze the clock, which is thawed (and *frozen
// cleared) before the handler runs; frozen may be nil.
func (sy *syncer) process(ep *tcp.Endpoint, frozen *bool) {
	var c *TCPConn
	if sy.nhandlers.Load() > 0 {
		if v, ok := sy.handlers.Load(ep); ok {
			c = v.(*TCPConn)
			c.inline.Store(inlineActive)
		}
	}
	// A Read in progress reads what this processes next: the ACK waits
	// for it (readDone), so that one ACK, not one now and a window update
	// after the read, answers the segments.
	mss := seqnum.Size(sy.wire.mss)
	limit := mss
	var r *TCPConn
	var reads uint32 // r's Read count when the ACK was left to that Read
	if sy.tcp != nil {
		if r = sy.tcp.conns.find(ep); r != nil {
			if reads = r.latReads.Load(); reads&1 == 1 {
				limit = noACK
			} else {
				r = nil
			}
		}
	}
	sy.wire.out.hold()
	owed := false
	for range 4 { // each pass takes up to 100 segments
		if !netstackunsafe.Connected(ep.EndpointState()) {
			break
		}
		owed = netstackunsafe.Process(ep, limit) || owed
		sy.processed.Add(1)
		if netstackunsafe.QueueEmpty(ep) {
			break
		}
	}
	netstackunsafe.Kick(ep)
	if c != nil && c.inline.Swap(inlineIdle) == inlinePending {
		// The handler runs inside the hold, so that its answer leaves with
		// (and carries) the ACK the processing owes.
		sy.inline.Add(1)
		if frozen != nil && *frozen {
			sy.clock.thaw(true)
			*frozen = false
		}
		c.inScope.Store(true)
		c.runHandler()
		c.inScope.Store(false)
	}
	if owed && r != nil {
		owed = r.leaveACK(reads) && sy.settle(ep)
	}
	if owed {
		sy.oweACK(ep)
	}
	sy.wire.out.release()
}

// leaveACK leaves the ACK of a processing that began during the Read
// counted reads to that Read, and reports true when this caller must
// settle it instead: that Read ended before the flag was set (and another
// may have begun, which may wait for data the ACK would bring), and this
// caller, not the ended Read, took the flag.
func (c *TCPConn) leaveACK(reads uint32) bool {
	c.latACK.Store(true)
	return c.latReads.Load() != reads && c.latACK.Swap(false)
}

// settle sends ep's ACK when more than a segment is unacknowledged, as
// Process does, and reports whether a smaller one remains owed (or ep was
// busy: whoever holds it may not send it).
func (sy *syncer) settle(ep *tcp.Endpoint) bool {
	owed, ok := netstackunsafe.SettleACKOver(ep, seqnum.Size(sy.wire.mss))
	return owed || !ok
}

// readDone ends c's Read in latency mode: it sends or owes the ACK that
// processing during the Read left to it, unless the Read's window update
// (afterRead) carried it already.
func (sy *syncer) readDone(c *TCPConn) {
	c.latReads.Add(1) // even: done
	if c.latACK.Swap(false) && sy.settle(c.tep) {
		sy.oweACK(c.tep)
	}
}

// oweACK has the outbox's timer send ep's ACK unless a segment carries it
// first (see netstackunsafe.Process); sent at once when the list of such endpoints is
// full.
func (sy *syncer) oweACK(ep *tcp.Endpoint) {
	o := sy.wire.out
	if still, ok := netstackunsafe.ACKOwed(ep); ok && !still {
		o.merged.Add(1) // the handler's answer carried it
		return
	}
	if !o.owe(ep) {
		netstackunsafe.SettleACK(ep) // list full (or closing): send it now
	}
}

// afterRead announces, after a Read that returned data, the window the
// read opened when it is at least twice what the peer may still send (see
// netstackunsafe.UpdateWindow); that ACK also carries any owed one. A nil
// syncer (latency mode off) leaves it to netstack, whose ACK for every
// segment keeps the window the peer sees current.
func (sy *syncer) afterRead(ep *tcp.Endpoint) {
	if sy != nil {
		netstackunsafe.UpdateWindow(ep, seqnum.Size(sy.wire.mss))
	}
}

// afterUser processes segments that arrived for ep while a Read or Write
// held it: netstack has woken a processor for them, but this goroutine is
// already running and usually gets there first.
func (sy *syncer) afterUser(ep *tcp.Endpoint) {
	if !netstackunsafe.QueueEmpty(ep) {
		sy.process(ep, nil)
	}
}
