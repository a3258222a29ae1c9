package tickwire

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// frameHold keeps, in stock mode over a link that delivers inline
// (link.InlineDeliverer), the SYN that netstack's Connect writes until the
// call has returned and let go of the endpoint. Over link/pipe the peer's
// SYN-ACK comes back on the same goroutine before the write returns; sent
// from inside the call, it finds the endpoint held, is queued, and costs a
// processor wake-up when the call lets go (netstack's UnlockUser), then
// one more for the dialer. Sent after the call, the SYN-ACK is processed
// on the spot (processDeferred), as Linux processes a loopback segment in
// the sender's softirq, and the dial finds its connection established.
//
// Frames keep their order: while a flush runs, every frame of the stack
// waits and the flush sends it too, as in latency mode's outbox; other
// connections' frames wait only then (a few microseconds). The flush runs
// outside any netstack call, so it is not counted in wire.sends: the
// answers it draws may be processed on its goroutine.
//
// Lock order:
//
//	frameHold.mu
type frameHold struct {
	// active is the number of holds plus one while a flush runs: WritePackets
	// looks no further while it is 0.
	active atomic.Int32
	mu     sync.Mutex
	// +checklocks:mu
	keys []holdKey
	// +checklocks:mu
	q []*gstack.PacketBuffer // held frames, each with its own reference
	// +checklocks:mu
	spare []*gstack.PacketBuffer
	// +checklocks:mu
	flushing bool
	// sending is the flusher's (only the goroutine that set flushing
	// touches it).
	sending gstack.PacketBufferList
}

// holdKey names the connection whose frames a hold keeps, by its peer and
// ports; lport 0 matches the SYN from any local port (a dial's, whose port
// Connect picks).
type holdKey struct {
	raddr        [4]byte
	rport, lport uint16
}

// hold starts holding the frames of connection k.
func (h *frameHold) hold(k holdKey) {
	h.mu.Lock()
	h.keys = append(h.keys, k)
	h.active.Add(1)
	h.mu.Unlock()
}

// take queues pkts, reporting true, when a flush is running or one of them
// belongs to a held connection; false (nothing done) otherwise.
func (h *frameHold) take(pkts gstack.PacketBufferList) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.flushing && !h.matchLocked(pkts) {
		return false
	}
	for _, pkt := range pkts.AsSlice() {
		h.q = append(h.q, pkt.IncRef())
	}
	return true
}

// matchLocked reports whether a packet of pkts belongs to a held
// connection.
//
// +checklocks:h.mu
func (h *frameHold) matchLocked(pkts gstack.PacketBufferList) bool {
	for _, pkt := range pkts.AsSlice() {
		if pkt.TransportProtocolNumber != header.TCPProtocolNumber {
			continue
		}
		ip, seg := header.IPv4(pkt.NetworkHeader().Slice()), header.TCP(pkt.TransportHeader().Slice())
		if len(ip) < header.IPv4MinimumSize || len(seg) < header.TCPMinimumSize {
			continue
		}
		dst := ip.DestinationAddress().As4()
		for _, k := range h.keys {
			if k.raddr != dst || k.rport != seg.DestinationPort() {
				continue
			}
			if k.lport == seg.SourcePort() || k.lport == 0 && seg.Flags()&(header.TCPFlagSyn|header.TCPFlagAck) == header.TCPFlagSyn {
				return true
			}
		}
	}
	return false
}

// release stops holding connection k and sends what waits, with the
// frames written meanwhile, through w's link, unless a flush is already
// running (it sends them).
func (h *frameHold) release(w *wire, k holdKey) {
	h.mu.Lock()
	for i := range h.keys {
		if h.keys[i] == k {
			h.keys = append(h.keys[:i], h.keys[i+1:]...)
			break
		}
	}
	h.active.Add(-1)
	if h.flushing || len(h.q) == 0 {
		h.mu.Unlock()
		return
	}
	h.flushing = true
	h.active.Add(1)
	for len(h.q) > 0 {
		batch := h.q
		h.q = h.spare[:0]
		for _, pkt := range batch {
			h.sending.PushBack(pkt) // the queue's reference goes with it
		}
		clear(batch)
		h.spare = batch[:0]
		h.mu.Unlock()
		_, _ = w.Endpoint.WritePackets(h.sending) // the link counts its own drops
		h.sending.Reset()                         // drops the queue's references
		h.mu.Lock()
	}
	h.flushing = false
	h.active.Add(-1)
	h.mu.Unlock()
}
