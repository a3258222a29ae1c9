// Package recorder wraps a link endpoint to record every frame it sends and
// receives to a pcap file, and to inject frames into its inbound path (the
// target of a pcap.Replayer).
//
// Install it between the stack and the real link:
//
//	tap, _ := tap.New(tap.Config{Name: "tw0"})
//	rec, _ := recorder.Create(tap, "tw0.pcap") // or recorder.New(tap, w)
//	s, _ := tickwire.New(tickwire.Config{Link: rec, ...})
//	defer s.Close() // closes rec, which closes tap and finishes the file
//
// The file is classic pcap, little-endian, with nanosecond timestamps and
// link type Ethernet (Raw IP when the wrapped link has no Ethernet header),
// readable by tshark, tcpdump and link/pcap. Recording reuses one buffer:
// it allocates nothing per frame. Write errors are counted and returned by
// Flush, Finish and Err; they never panic and never stop traffic. The
// recorder passes every optional feature of package link (busy-polling,
// checksum drop counts) on to the link it wraps, so that a recorded TAP
// behaves as the TAP does.
package recorder

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/layers"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/nested"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/link"
	"github.com/tickwire/tickwire/link/internal/linkbase"
	"github.com/tickwire/tickwire/link/pcap"
)

// ErrShortFrame is returned by InjectFrame for a frame shorter than the
// link header.
var ErrShortFrame = errors.New("recorder: frame shorter than its link header")

// ErrBadChecksum is returned by InjectFrame for an IPv4 frame with a wrong
// header or transport checksum when the wrapped link verifies checksums for
// the stack (it reports stack.CapabilityRXChecksumOffload, as link/tap
// does): the stack would not check it.
var ErrBadChecksum = errors.New("recorder: frame with a wrong checksum")

// Stats counts the recorder's work. All counters only grow.
type Stats struct {
	Sent     uint64 // outbound frames recorded
	Received uint64 // inbound frames recorded (injected ones included)
	Bytes    uint64 // frame bytes recorded, before snap-length truncation
	Lost     uint64 // frames not recorded because of a write error
	Injected uint64 // frames delivered by InjectFrame
	Rejected uint64 // frames InjectFrame refused
}

// Endpoint is a stack.LinkEndpoint that records the frames of the endpoint
// it wraps. All methods are safe for concurrent use: frames from the send
// and receive paths are serialised by one mutex around the writer, which is
// never held while calling the wrapped endpoint or the stack.
//
// Lock order:
//
//	mu
type Endpoint struct {
	nested.Endpoint
	ethernet bool // the wrapped link's frames start with an Ethernet header

	mu sync.Mutex
	// +checklocks:mu
	w *pcap.Writer // nil when not recording or finished
	// +checklocks:mu
	scratch []byte // one frame, flattened for the writer
	// +checklocks:mu
	err error // the first write error

	sent, received, bytes, lost, injected, rejected atomic.Uint64
	closeOnce                                       sync.Once
	// up is the stack's dispatcher when it takes receive times.
	up atomic.Pointer[stampedRef]
	// upGSO is the stack's dispatcher when it takes large segments.
	upGSO atomic.Pointer[gsoRef]
}

type stampedRef struct{ d link.TimestampDispatcher }

type gsoRef struct{ r link.GSOReceiver }

var (
	_ stack.LinkEndpoint       = (*Endpoint)(nil)
	_ link.TimestampDispatcher = (*Endpoint)(nil)
	_ pcap.TimestampInjector   = (*Endpoint)(nil)
	_ link.GSOReceiver         = (*Endpoint)(nil)
)

// New wraps child. When w is not nil it writes a pcap file header to w and
// records every frame; with a nil w the Endpoint only injects. If w is an
// io.Closer, Finish (and Close) close it.
func New(child stack.LinkEndpoint, w io.Writer) (*Endpoint, error) {
	e := &Endpoint{ethernet: child.ARPHardwareType() == header.ARPHardwareEther && child.MaxHeaderLength() >= header.EthernetMinimumSize}
	e.Init(child, e)
	if w != nil {
		lt := layers.LinkTypeRaw
		if e.ethernet {
			lt = layers.LinkTypeEthernet
		}
		pw, err := pcap.NewWriter(w, lt, 0)
		if err != nil {
			return nil, err
		}
		e.w = pw
		e.scratch = make([]byte, pw.SnapLen())
	}
	return e, nil
}

// Create wraps child and records to a new file at path.
func Create(child stack.LinkEndpoint, path string) (*Endpoint, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	e, err := New(child, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return e, nil
}

// record writes the whole frame held in pkt: from its first header byte,
// pushed (outbound) or consumed (inbound), to its end. An outbound GSO
// segment is recorded whole with its TCP checksum completed; an inbound one
// (from link/pipe) keeps the partial sum it arrived with, as tcpdump on
// Linux's loopback shows.
func (e *Endpoint) record(pkt *stack.PacketBuffer, inbound bool) {
	size := pkt.Size()
	e.mu.Lock()
	if e.w == nil {
		e.mu.Unlock()
		return
	}
	// Read the clock under the lock so that records are in time order.
	now := time.Now().UnixNano()
	n := 0
	views, off := pkt.AsViewList()
	for v := views.Front(); v != nil && n < len(e.scratch); v = v.Next() {
		s := v.AsSlice()
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n += copy(e.scratch[n:], s[off:])
		off = 0
	}
	if !inbound && pkt.GSOOptions.NeedsCsum && n == size && e.ethernet {
		// The link completes a GSO segment's checksum; record it as sent.
		linkbase.CompleteChecksums(e.scratch[:n])
	}
	err := e.w.WriteFrame(now, e.scratch[:n], size)
	if err != nil && e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
	if err != nil {
		e.lost.Add(1)
		return
	}
	if inbound {
		e.received.Add(1)
	} else {
		e.sent.Add(1)
	}
	e.bytes.Add(uint64(size))
}

// WritePackets implements stack.LinkEndpoint.WritePackets: it records each
// packet, then hands the list to the wrapped endpoint.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	for _, pkt := range pkts.AsSlice() {
		e.record(pkt, false)
	}
	return e.Endpoint.WritePackets(pkts)
}

// DeliverNetworkPacket implements stack.NetworkDispatcher: it records the
// inbound frame, then passes it up to the stack.
func (e *Endpoint) DeliverNetworkPacket(protocol tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	e.record(pkt, true)
	e.Endpoint.DeliverNetworkPacket(protocol, pkt)
}

// DeliverNetworkPacketAt implements link.TimestampDispatcher: it records the
// inbound frame, then passes it up to the stack with its receive time rx.
func (e *Endpoint) DeliverNetworkPacketAt(protocol tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer, rx int64) {
	e.record(pkt, true)
	if up := e.up.Load(); up != nil && rx != 0 {
		up.d.DeliverNetworkPacketAt(protocol, pkt, rx)
		return
	}
	e.Endpoint.DeliverNetworkPacket(protocol, pkt)
}

// Attach implements stack.LinkEndpoint.Attach.
func (e *Endpoint) Attach(dispatcher stack.NetworkDispatcher) {
	if d, ok := dispatcher.(link.TimestampDispatcher); ok {
		e.up.Store(&stampedRef{d})
	} else {
		e.up.Store(nil)
	}
	if r, ok := dispatcher.(link.GSOReceiver); ok {
		e.upGSO.Store(&gsoRef{r})
	} else {
		e.upGSO.Store(nil)
	}
	e.Endpoint.Attach(dispatcher)
}

// ReceivesGSO implements link.GSOReceiver: the stack's answer, false when
// it has none.
func (e *Endpoint) ReceivesGSO() bool {
	r := e.upGSO.Load()
	return r != nil && r.r.ReceivesGSO()
}

// InjectFrame implements pcap.Injector: it copies frame into a new packet
// and delivers it to the stack as if the wrapped link had received it (and
// records it). It does NOT take ownership of frame. Unicast frames are
// delivered as addressed to this host whatever their destination MAC, so a
// capture of another host's traffic can be replayed into a stack that owns
// the destination IP address.
func (e *Endpoint) InjectFrame(frame []byte) error {
	return e.InjectFrameAt(frame, 0)
}

// InjectFrameAt implements pcap.TimestampInjector: InjectFrame for a frame
// captured at rx, which the stack takes as its receive time (0: the stack
// stamps it on arrival).
func (e *Endpoint) InjectFrameAt(frame []byte, rx int64) error {
	if !e.IsAttached() {
		return pcap.ErrNotAttached
	}
	var proto tcpip.NetworkProtocolNumber
	if e.ethernet {
		if len(frame) < header.EthernetMinimumSize {
			e.rejected.Add(1)
			return ErrShortFrame
		}
		proto = header.Ethernet(frame).Type()
	} else {
		if len(frame) == 0 {
			e.rejected.Add(1)
			return ErrShortFrame
		}
		switch frame[0] >> 4 {
		case 4:
			proto = header.IPv4ProtocolNumber
		case 6:
			proto = header.IPv6ProtocolNumber
		}
	}
	if proto == header.IPv4ProtocolNumber && e.Capabilities()&stack.CapabilityRXChecksumOffload != 0 {
		ip := frame
		if e.ethernet {
			ip = frame[header.EthernetMinimumSize:]
		}
		if linkbase.VerifyIPv4(ip) != linkbase.ChecksumOK {
			e.rejected.Add(1)
			return ErrBadChecksum
		}
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	defer pkt.DecRef()
	if e.ethernet {
		hdr, _ := pkt.LinkHeader().Consume(header.EthernetMinimumSize)
		switch dst := header.Ethernet(hdr).DestinationAddress(); {
		case dst == header.EthernetBroadcastAddress:
			pkt.PktType = tcpip.PacketBroadcast
		case header.IsMulticastEthernetAddress(dst):
			pkt.PktType = tcpip.PacketMulticast
		}
	}
	pkt.NetworkProtocolNumber = proto
	e.injected.Add(1)
	e.DeliverNetworkPacketAt(proto, pkt, rx)
	return nil
}

// The recorder forwards every optional link feature to the link it wraps.
var (
	_ link.BusyPoller          = (*Endpoint)(nil)
	_ link.ChecksumDropCounter = (*Endpoint)(nil)
	_ link.ThreadLocker        = (*Endpoint)(nil)
	_ link.TxBacklogger        = (*Endpoint)(nil)
	_ link.InlineDeliverer     = (*Endpoint)(nil)
)

// DeliversInline implements link.InlineDeliverer: the wrapped link's
// answer, false when it does not say.
func (e *Endpoint) DeliversInline() bool {
	l, ok := e.Child().(link.InlineDeliverer)
	return ok && l.DeliversInline()
}

// TxBacklog implements link.TxBacklogger: the wrapped link's backlog, 0
// when it reports none.
func (e *Endpoint) TxBacklog() int {
	if l, ok := e.Child().(link.TxBacklogger); ok {
		return l.TxBacklog()
	}
	return 0
}

// TxQueueLen implements link.TxBacklogger: the wrapped link's, 0 when it
// reports no backlog.
func (e *Endpoint) TxQueueLen() int {
	if l, ok := e.Child().(link.TxBacklogger); ok {
		return l.TxQueueLen()
	}
	return 0
}

// NotifyTxBacklog implements link.TxBacklogger: the wrapped link's request;
// false, with nothing to wait for, when it reports no backlog.
func (e *Endpoint) NotifyTxBacklog(n int, fn func()) bool {
	if l, ok := e.Child().(link.TxBacklogger); ok {
		return l.NotifyTxBacklog(n, fn)
	}
	return false
}

// RxChecksumDrops implements link.ChecksumDropCounter: the wrapped link's
// counts (link/tap has them), zeros when it has none.
func (e *Endpoint) RxChecksumDrops() (ipv4, tcp, udp, icmp uint64) {
	if l, ok := e.Child().(link.ChecksumDropCounter); ok {
		return l.RxChecksumDrops()
	}
	return 0, 0, 0, 0
}

// SetBusyPoll implements link.BusyPoller: it passes d on to the wrapped
// link, and does nothing when that link does not busy-poll.
func (e *Endpoint) SetBusyPoll(d time.Duration) {
	if l, ok := e.Child().(link.BusyPoller); ok {
		l.SetBusyPoll(d)
	}
}

// SetLockOSThread implements link.ThreadLocker: it passes lock on to the
// wrapped link, and does nothing when that link has no reader of its own.
func (e *Endpoint) SetLockOSThread(lock bool) {
	if l, ok := e.Child().(link.ThreadLocker); ok {
		l.SetLockOSThread(lock)
	}
}

// Stats returns the counters.
func (e *Endpoint) Stats() Stats {
	return Stats{
		Sent:     e.sent.Load(),
		Received: e.received.Load(),
		Bytes:    e.bytes.Load(),
		Lost:     e.lost.Load(),
		Injected: e.injected.Load(),
		Rejected: e.rejected.Load(),
	}
}

// Err returns the first write error, nil if none.
func (e *Endpoint) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Flush writes buffered records to the file. It returns the first write
// error of the recording.
func (e *Endpoint) Flush() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.w == nil {
		return e.err
	}
	if err := e.w.Flush(); err != nil && e.err == nil {
		e.err = err
	}
	return e.err
}

// Finish stops recording: it flushes and closes the file (when the writer
// is an io.Closer) and returns the first error of the recording. Traffic
// keeps flowing through the Endpoint, unrecorded. Finish is idempotent.
func (e *Endpoint) Finish() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.w != nil {
		if err := e.w.Close(); err != nil && e.err == nil {
			e.err = err
		}
		e.w = nil
	}
	return e.err
}

// Close implements stack.LinkEndpoint.Close: it closes the wrapped endpoint,
// then finishes the recording. The stack calls it when it removes the link;
// call Err afterwards to learn whether the file is complete.
func (e *Endpoint) Close() {
	e.closeOnce.Do(func() {
		e.Endpoint.Close()
		e.Finish()
	})
}
