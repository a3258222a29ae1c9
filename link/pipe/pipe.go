// Package pipe connects two stack.LinkEndpoints in one process, like an
// Ethernet cable between two NICs, for tests and benchmarks.
//
//	a, b := pipe.New(pipe.Options{})
//	left, _ := tickwire.New(tickwire.Config{Link: a, MAC: a.MAC(), Addr: netip.MustParsePrefix("10.0.0.1/24")})
//	right, _ := tickwire.New(tickwire.Config{Link: b, MAC: b.MAC(), Addr: netip.MustParsePrefix("10.0.0.2/24")})
//
// A frame written on one end is delivered inline, by the writing goroutine,
// to the other end's dispatcher, without copying: the receiver gets a new
// PacketBuffer that shares the sender's payload chunks by reference. The pipe
// starts no goroutine.
//
// # Segmentation offload
//
// Unless Options.NoGSO is set, each end offers GSO (stack.HostGSOSupported,
// up to GSOMaxSize bytes) to a sending stack whose peer's dispatcher takes
// large segments (link.GSOReceiver, as a tickwire Stack does): TCP then sends
// up to a window's worth of data as one frame with a partial checksum, and
// the peer stack takes it whole, as Linux's loopback and veth carry 64 KiB
// segments. Frames above the MTU and partial checksums exist only inside
// the process: the pipe passes them from stack to stack, a device model on
// the other end (one that is not a GSOReceiver) never receives one, and the
// MSS the stacks announce is unchanged. Since only stacks in this process
// write frames, each end then reports stack.CapabilityRXChecksumOffload: the
// receiving stack checks no checksum, and Send, the one way in for frames
// nobody vouched for, checks them instead.
//
// # Concurrency contract
//
// Each direction has a busy flag and a bounded FIFO. A writer that finds its
// direction idle delivers inline, then drains whatever other writers queued
// meanwhile, in order, before it returns. A writer that finds the direction
// busy (another goroutine is delivering, or the frame is a reply sent from
// inside the delivery of a frame in the same direction's chain) queues the
// frame with its own reference and returns at once; when the FIFO is full
// (Options.QueueLen) the frame is dropped and counted. A reply sent by the
// receiving stack from inside a delivery therefore recurses at most one level
// (the other direction) and a stack callback never blocks on the pipe.
//
// All methods are safe for concurrent use.
package pipe

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/internal/rxclock"
	"github.com/tickwire/tickwire/link"
	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// Defaults applied by New to zero Options fields.
const (
	DefaultMTU      = 1500
	DefaultQueueLen = 1024
)

// GSOMaxSize is the largest frame, Ethernet header excluded, that a stack
// builds for a pipe that offers GSO: netstack's limit for software
// segmentation, and the most an IPv4 header's length field can say.
const GSOMaxSize = stack.GVisorGSOMaxSize

// ErrBadFrame is returned by Send for a frame shorter than an Ethernet header
// or longer than the MTU allows.
var ErrBadFrame = errors.New("pipe: frame length out of range")

// Options configures New. The zero value is usable.
type Options struct {
	// MTU is the largest IPv4 packet each end carries, excluding the 14-byte
	// Ethernet header. Default 1500.
	MTU uint32
	// MACA and MACB are the ends' link addresses. Default 02:00:00:00:00:0a
	// and 02:00:00:00:00:0b (locally administered). Each must be 6 bytes.
	MACA, MACB net.HardwareAddr
	// QueueLen bounds, per direction, the frames waiting while another
	// goroutine delivers in that direction. Frames beyond it are dropped and
	// counted in Stats.Dropped. Default 1024.
	QueueLen int
	// NoGSO turns segmentation offload off (see the package doc): every
	// frame is at most the MTU and carries full checksums, which the
	// receiving stack verifies. Tests that count or inspect wire-sized
	// segments set it.
	NoGSO bool
}

// Stats counts one end's transmit side.
type Stats struct {
	Sent      uint64 // frames accepted for delivery to the other end
	Delivered uint64 // frames handed to the other end's dispatcher
	Dropped   uint64 // frames dropped: queue full, peer detached or closed
	Queued    uint64 // frames that waited in the queue instead of going inline
	// Large counts the frames above the MTU (GSO segments) among Sent.
	Large uint64
}

// Endpoint is one end of a pipe. It implements stack.LinkEndpoint for an
// Ethernet link; see the package doc for the concurrency contract.
type Endpoint struct {
	linkbase.Endpoint
	peer *Endpoint
	out  direction // frames this end sends to peer
	gso  bool      // Options.NoGSO unset; fixed by New

	// bad counts, by verdict, the frames Send dropped toward this end for a
	// wrong checksum (gso only; see Capabilities).
	bad [linkbase.BadICMPChecksum + 1]atomic.Uint64

	sniffMu sync.RWMutex
	// +checklocks:sniffMu
	sniff func(frame []byte)
}

var (
	_ stack.LinkEndpoint       = (*Endpoint)(nil)
	_ stack.GSOEndpoint        = (*Endpoint)(nil)
	_ link.ChecksumDropCounter = (*Endpoint)(nil)
	_ link.InlineDeliverer     = (*Endpoint)(nil)
	_ link.TxBacklogger        = (*Endpoint)(nil)
)

// direction is the state of one way of the pipe.
//
// Lock order:
//
//	direction.mu
type direction struct {
	mu sync.Mutex
	// +checklocks:mu
	busy bool
	// +checklocks:mu
	queue  []*stack.PacketBuffer // ring of cap queueLen
	sentAt []int64               // queue's frames' send times, link.TimestampDispatcher's rx
	// +checklocks:mu
	head int
	// +checklocks:mu
	n int

	queueLen int // len(queue), fixed by New

	// armed says that a NotifyTxBacklog request waits: the one atomic load
	// a delivered frame pays when none does. notifyMu is never held with
	// mu.
	armed    atomic.Bool
	notifyMu sync.Mutex
	// +checklocks:notifyMu
	notifyAt int
	// +checklocks:notifyMu
	notifyFn func()

	sent, delivered, dropped, queued, large atomic.Uint64
}

// New returns the two connected ends of a new pipe.
func New(opts Options) (*Endpoint, *Endpoint) {
	if opts.MTU == 0 {
		opts.MTU = DefaultMTU
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = DefaultQueueLen
	}
	if len(opts.MACA) != header.EthernetAddressSize {
		opts.MACA = net.HardwareAddr{2, 0, 0, 0, 0, 0x0a}
	}
	if len(opts.MACB) != header.EthernetAddressSize {
		opts.MACB = net.HardwareAddr{2, 0, 0, 0, 0, 0x0b}
	}
	a, b := &Endpoint{}, &Endpoint{}
	a.Init(tcpip.LinkAddress(opts.MACA), opts.MTU)
	b.Init(tcpip.LinkAddress(opts.MACB), opts.MTU)
	a.peer, b.peer = b, a
	a.gso, b.gso = !opts.NoGSO, !opts.NoGSO
	a.out.queue, a.out.sentAt = make([]*stack.PacketBuffer, opts.QueueLen), make([]int64, opts.QueueLen)
	b.out.queue, b.out.sentAt = make([]*stack.PacketBuffer, opts.QueueLen), make([]int64, opts.QueueLen)
	a.out.queueLen, b.out.queueLen = opts.QueueLen, opts.QueueLen
	return a, b
}

// MAC returns the end's link address as a net.HardwareAddr.
func (e *Endpoint) MAC() net.HardwareAddr {
	return net.HardwareAddr(e.LinkAddress())
}

// Peer returns the other end of the pipe.
func (e *Endpoint) Peer() *Endpoint { return e.peer }

// Stats returns this end's transmit counters.
func (e *Endpoint) Stats() Stats {
	return Stats{
		Sent:      e.out.sent.Load(),
		Delivered: e.out.delivered.Load(),
		Dropped:   e.out.dropped.Load(),
		Queued:    e.out.queued.Load(),
		Large:     e.out.large.Load(),
	}
}

// SupportedGSO implements stack.GSOEndpoint.SupportedGSO: HostGSOSupported
// when the pipe offers GSO and the other end's dispatcher takes large
// segments (link.GSOReceiver), else GSONotSupported. netstack asks when a
// connection starts, so a connection keeps the answer it got.
func (e *Endpoint) SupportedGSO() stack.SupportedGSO {
	if e.gso {
		if r, ok := e.peer.Dispatcher().(link.GSOReceiver); ok && r.ReceivesGSO() {
			return stack.HostGSOSupported
		}
	}
	return stack.GSONotSupported
}

// GSOMaxSize implements stack.GSOEndpoint.GSOMaxSize: GSOMaxSize, or 0
// without GSO.
func (e *Endpoint) GSOMaxSize() uint32 {
	if e.gso {
		return GSOMaxSize
	}
	return 0
}

// Capabilities implements stack.LinkEndpoint.Capabilities. With GSO the
// end reports stack.CapabilityRXChecksumOffload: what it receives comes
// from a stack in this process, which a cable cannot corrupt, or from Send,
// which checks it (see the package doc).
func (e *Endpoint) Capabilities() stack.LinkEndpointCapabilities {
	if e.gso {
		return e.Endpoint.Capabilities() | stack.CapabilityRXChecksumOffload
	}
	return e.Endpoint.Capabilities()
}

// RxChecksumDrops implements link.ChecksumDropCounter: the frames Send
// dropped toward this end for a wrong checksum (only with GSO: without it
// the receiving stack checks and counts them itself).
func (e *Endpoint) RxChecksumDrops() (ipv4, tcp, udp, icmp uint64) {
	return e.bad[linkbase.BadIPv4Checksum].Load(), e.bad[linkbase.BadTCPChecksum].Load(),
		e.bad[linkbase.BadUDPChecksum].Load(), e.bad[linkbase.BadICMPChecksum].Load()
}

// TxBacklog implements link.TxBacklogger.TxBacklog: the frames sent toward
// the peer that are not delivered (or dropped) yet.
func (e *Endpoint) TxBacklog() int {
	d := &e.out
	done := d.delivered.Load() + d.dropped.Load() // before sent: never above it
	return int(d.sent.Load() - done)
}

// DeliversInline implements link.InlineDeliverer: a writer that finds its
// direction idle delivers the frame itself (see the package doc).
func (*Endpoint) DeliversInline() bool { return true }

// TxQueueLen implements link.TxBacklogger.TxQueueLen: Options.QueueLen.
func (e *Endpoint) TxQueueLen() int { return e.out.queueLen }

// NotifyTxBacklog implements link.TxBacklogger.NotifyTxBacklog: fn runs on
// the goroutine that delivers the frame that brings the backlog down to n
// (or on the one closing the end).
func (e *Endpoint) NotifyTxBacklog(n int, fn func()) bool {
	d := &e.out
	d.notifyMu.Lock()
	d.notifyAt, d.notifyFn = n, fn
	d.armed.Store(true)
	d.notifyMu.Unlock()
	// A delivery that counted itself before the store above did not see
	// the request, so the backlog is checked after it.
	if e.TxBacklog() > n {
		return true
	}
	d.notifyMu.Lock()
	withdrawn := d.armed.Swap(false) // false: a delivery took the request and calls fn
	if withdrawn {
		d.notifyFn = nil
	}
	d.notifyMu.Unlock()
	return !withdrawn
}

// notifyDrained calls the function of a NotifyTxBacklog request once the
// backlog is down to its bound.
func (e *Endpoint) notifyDrained() {
	d := &e.out
	if !d.armed.Load() {
		return
	}
	d.notifyMu.Lock()
	if !d.armed.Load() || e.TxBacklog() > d.notifyAt {
		d.notifyMu.Unlock()
		return
	}
	d.armed.Store(false)
	fn := d.notifyFn
	d.notifyFn = nil
	d.notifyMu.Unlock()
	fn()
}

// SetSniffer registers fn to see every frame this end transmits (the
// Ethernet header included), before it is delivered; nil removes it. fn runs
// on the writing goroutine and must not block; frame is valid until fn
// returns. With a sniffer set, each frame is flattened into a new slice, so
// use it in tests, not in benchmarks. A GSO segment is seen as the pipe
// carries it, one frame up to GSOMaxSize bytes, except that its TCP checksum
// is completed in the copy, as a NIC would, so that a capture checks.
func (e *Endpoint) SetSniffer(fn func(frame []byte)) {
	e.sniffMu.Lock()
	e.sniff = fn
	e.sniffMu.Unlock()
}

// WritePackets implements stack.LinkEndpoint.WritePackets. It does NOT take
// ownership of the packets' references (the caller drops them after the
// call, as netstack does): the peer receives new packets that share their
// bytes. Frames that cannot be delivered are counted as dropped but reported
// as written, like frames lost on a cable.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	n := 0
	for _, pkt := range pkts.AsSlice() {
		// The receiver must parse the link header again, so it gets a fresh
		// packet sharing pkt's bytes rather than pkt with its offsets.
		frame := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: pkt.ToBuffer()})
		e.transmit(frame, pkt.GSOOptions.Type != stack.GSONone && pkt.GSOOptions.NeedsCsum)
		n++
	}
	return n, nil
}

// Send transmits a raw Ethernet frame to the other end, as if this end's
// stack had written it: tests use it to inject hand-made frames. It does NOT
// take ownership of frame: the bytes are copied. It returns ErrBadFrame for a
// frame shorter than an Ethernet header or longer than header plus MTU.
//
// With GSO the receiving stack trusts its link's checksums, so Send checks
// an IPv4 frame's instead, as a NIC with receive checksum offload does: a
// frame with a wrong one is dropped (and counted in the peer's
// RxChecksumDrops, which the peer's Stack adds to its Stats), and Send
// returns nil, as for a frame lost on a cable.
func (e *Endpoint) Send(frame []byte) error {
	if len(frame) < linkbase.HeaderLength || len(frame) > linkbase.HeaderLength+int(e.MTU()) {
		return ErrBadFrame
	}
	if e.peer.gso && header.Ethernet(frame).Type() == header.IPv4ProtocolNumber && !e.peer.checksumsOK(frame[linkbase.HeaderLength:]) {
		return nil
	}
	e.transmit(stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)}), false)
	return nil
}

// checksumsOK checks ip, an IPv4 packet sent toward e, and counts it in e's
// drops when a checksum is wrong.
func (e *Endpoint) checksumsOK(ip []byte) bool {
	v := linkbase.VerifyIPv4(ip)
	if v == linkbase.ChecksumOK {
		return true
	}
	e.bad[v].Add(1)
	return false
}

// transmit takes ownership of frame (a packet holding a whole Ethernet frame
// in its payload) and delivers it to the peer inline or queues it. partial
// says that the frame's TCP checksum is GSO's partial sum.
func (e *Endpoint) transmit(frame *stack.PacketBuffer, partial bool) {
	e.out.sent.Add(1)
	if frame.Size() > linkbase.HeaderLength+int(e.MTU()) {
		e.out.large.Add(1)
	}
	rx := rxclock.Now() // the peer's stamp: the frame is on its link now
	e.sniffFrame(frame, partial)
	d := &e.out
	d.mu.Lock()
	if d.busy {
		if d.n == len(d.queue) {
			d.mu.Unlock()
			d.dropped.Add(1)
			frame.DecRef()
			return
		}
		d.queue[(d.head+d.n)%len(d.queue)] = frame
		d.sentAt[(d.head+d.n)%len(d.queue)] = rx
		d.n++
		d.mu.Unlock()
		d.queued.Add(1)
		return
	}
	d.busy = true
	d.mu.Unlock()

	for {
		e.deliver(frame, rx)
		d.mu.Lock()
		if d.n == 0 {
			d.busy = false
			d.mu.Unlock()
			return
		}
		frame, rx = d.queue[d.head], d.sentAt[d.head]
		d.queue[d.head] = nil
		d.head = (d.head + 1) % len(d.queue)
		d.n--
		d.mu.Unlock()
	}
}

// deliver hands frame, sent at rx, to the peer's dispatcher and drops the
// reference.
func (e *Endpoint) deliver(frame *stack.PacketBuffer, rx int64) {
	if e.peer.DeliverFrameAt(frame, rx) {
		e.out.delivered.Add(1)
	} else {
		e.out.dropped.Add(1)
	}
	frame.DecRef()
	e.notifyDrained()
}

func (e *Endpoint) sniffFrame(frame *stack.PacketBuffer, partial bool) {
	e.sniffMu.RLock()
	fn := e.sniff
	e.sniffMu.RUnlock()
	if fn == nil {
		return
	}
	v := frame.ToView()
	if partial {
		linkbase.CompleteChecksums(v.AsSlice())
	}
	fn(v.AsSlice())
	v.Release()
}

// Close implements stack.LinkEndpoint.Close. Frames still queued toward the
// peer are dropped.
func (e *Endpoint) Close() {
	d := &e.out
	d.mu.Lock()
	var drop []*stack.PacketBuffer
	for d.n > 0 {
		drop = append(drop, d.queue[d.head])
		d.queue[d.head] = nil
		d.head = (d.head + 1) % len(d.queue)
		d.n--
	}
	d.mu.Unlock()
	for _, p := range drop {
		d.dropped.Add(1)
		p.DecRef()
	}
	e.notifyDrained()
	e.Endpoint.Close()
}
