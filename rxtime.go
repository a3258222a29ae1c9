package tickwire

import (
	"sync"
	"sync/atomic"
	"time"

	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// Receive times. Every inbound frame carries the time its link received it
// (link.TimestampDispatcher: the TAP read, the pipe send, the capture time
// of a replay, a ring's completion), or else the time it reached the wire,
// in nanoseconds since the Unix epoch on the real-time clock. The wire hands
// it to what delivers the frame's payload: to direct UDP delivery with the
// datagram, to direct TCP delivery with the segment, and, for a segment
// that goes through netstack's IPv4 layer and demultiplexer, to
// tcpProtocol.QueuePacket through an rxStash. A connection keeps the time
// of the newest segment with payload it was given (rxConns).

// rxTime converts a receive time to a time.Time; 0 is the zero Time.
func rxTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// rxStashSlots bounds the packets in netstack's inbound path at once whose
// receive times the stash holds; beyond it (more deliveries in progress on
// as many goroutines), QueuePacket stamps a segment when it sees it.
const rxStashSlots = 32

// rxStash hands the receive time of a packet the wire passes to netstack on
// to tcpProtocol.QueuePacket, which netstack calls with the same packet on
// the same goroutine before the wire's call returns. Slots are claimed with
// a compare-and-swap; a lookup compares pointers, so a packet never finds
// another's time.
type rxStash struct {
	next  atomic.Uint32
	slots [rxStashSlots]struct {
		pkt atomic.Pointer[gstack.PacketBuffer]
		rx  atomic.Int64
		// ep is the endpoint QueuePacket queued the packet's segment to
		// for the wire to process (deferTo), nil if none.
		ep atomic.Pointer[tcp.Endpoint]
	}
}

// put records pkt's receive time and returns the slot to give to clear;
// -1 when no slot was free.
func (s *rxStash) put(pkt *gstack.PacketBuffer, rx int64) int {
	for range 4 {
		i := s.next.Add(1) % rxStashSlots
		if s.slots[i].pkt.CompareAndSwap(nil, pkt) {
			s.slots[i].rx.Store(rx)
			return int(i)
		}
	}
	return -1
}

// clear frees slot i (from put) and returns the endpoint deferTo recorded
// in it, nil if none; -1 is ignored.
func (s *rxStash) clear(i int) *tcp.Endpoint {
	if i < 0 {
		return nil
	}
	ep := s.slots[i].ep.Swap(nil)
	s.slots[i].pkt.Store(nil)
	return ep
}

// deferTo records in pkt's slot that its segment was queued to ep for the
// wire to process once netstack's inbound path has returned
// (wire.processDeferred); false when pkt has no slot.
func (s *rxStash) deferTo(pkt *gstack.PacketBuffer, ep *tcp.Endpoint) bool {
	for i := range s.slots {
		if s.slots[i].pkt.Load() == pkt {
			s.slots[i].ep.Store(ep)
			return true
		}
	}
	return false
}

// get returns pkt's receive time, 0 when it was not recorded.
func (s *rxStash) get(pkt *gstack.PacketBuffer) int64 {
	for i := range s.slots {
		if s.slots[i].pkt.Load() == pkt {
			return s.slots[i].rx.Load()
		}
	}
	return 0
}

// rxEarlyMax bounds the endpoints rxConns keeps a receive time for before
// the program has their connection; beyond it those times are lost.
const rxEarlyMax = 256

// rxConns maps the endpoints of the program's connections to their
// TCPConn, which keeps the receive time (TCPConn.rx) and the reader's
// hand-off (handoff.go): at most MaxConnections entries. It also keeps the
// time of the newest data of an endpoint the program does not hold yet (a
// connection whose first bytes arrive before Accept returns it), at most
// rxEarlyMax, which add hands over. Every segment with payload looks its
// endpoint up; a sync.Map's reads take no lock, so the link readers of a
// multi-queue link do not contend on one.
type rxConns struct {
	m  sync.Map // *tcp.Endpoint -> *TCPConn
	mu sync.Mutex
	// +checklocks:mu
	early map[*tcp.Endpoint]int64
}

// add registers ep's connection c.
func (r *rxConns) add(ep *tcp.Endpoint, c *TCPConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m.Store(ep, c)
	if t, ok := r.early[ep]; ok {
		c.rx.Store(t)
		delete(r.early, ep)
	}
}

// remove forgets ep.
func (r *rxConns) remove(ep *tcp.Endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m.Delete(ep)
	delete(r.early, ep)
}

// find returns ep's connection, nil when the program does not hold it.
func (r *rxConns) find(ep *tcp.Endpoint) *TCPConn {
	if c, ok := r.m.Load(ep); ok {
		return c.(*TCPConn)
	}
	return nil
}

// stamp records rx as ep's newest receive time.
func (r *rxConns) stamp(ep *tcp.Endpoint, rx int64) {
	if c := r.find(ep); c != nil {
		c.rx.Store(rx)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.find(ep); c != nil { // added meanwhile
		c.rx.Store(rx)
		return
	}
	if r.early == nil {
		r.early = make(map[*tcp.Endpoint]int64)
	}
	if _, ok := r.early[ep]; ok || len(r.early) < rxEarlyMax {
		r.early[ep] = rx
		return
	}
	// Full of endpoints the program never took (refused, reset before
	// Accept): start over rather than keep them.
	clear(r.early)
	r.early[ep] = rx
}
