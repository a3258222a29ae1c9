// Package linkbase holds the part of stack.LinkEndpoint that every tickwire
// Ethernet link shares, so that each link package writes the wide gVisor
// interface once, as gVisor's nested.Endpoint does for its wrappers.
//
// A link embeds Endpoint, implements WritePackets (and Wait and Close when it
// owns goroutines or descriptors), and hands each received frame to
// DeliverFrame:
//
//	type Endpoint struct {
//		linkbase.Endpoint
//		fd int
//	}
//
//	func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) { ... }
//
// The frames a link sends and receives carry an Ethernet II header (no VLAN
// tag, no FCS); the MTU is the largest IPv4 packet, excluding that header.
package linkbase

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/link"
)

// HeaderLength is the length of the Ethernet II header the links add and
// parse.
const HeaderLength = header.EthernetMinimumSize

// Endpoint implements every stack.LinkEndpoint method except WritePackets for
// an Ethernet link. Its zero value is a link with MTU 0 and no address: call
// Init first.
//
// All methods are safe for concurrent use. The dispatcher, MTU and address,
// read for every frame (the stack asks for the MTU and address on its send
// path too), are atomic values: a read costs a load, no lock. DeliverFrame
// holds nothing while it calls the dispatcher, so a dispatcher may send (and
// a link may deliver inline) without deadlocking on the endpoint.
type Endpoint struct {
	dispatcher atomic.Pointer[dispatcherRef] // nil: detached
	mtu        atomic.Uint32
	addr       atomic.Pointer[tcpip.LinkAddress] // nil: no address

	mu sync.Mutex
	// +checklocks:mu
	onClose func()
	// +checklocks:mu
	closed bool
}

// dispatcherRef holds a dispatcher for an atomic pointer, and the same
// dispatcher as a link.TimestampDispatcher when it is one.
type dispatcherRef struct {
	d       stack.NetworkDispatcher
	stamped link.TimestampDispatcher
}

// Init sets the link address and MTU (the largest network-layer packet,
// excluding the Ethernet header).
func (e *Endpoint) Init(addr tcpip.LinkAddress, mtu uint32) {
	e.SetLinkAddress(addr)
	e.mtu.Store(mtu)
}

// MTU implements stack.LinkEndpoint.MTU.
func (e *Endpoint) MTU() uint32 { return e.mtu.Load() }

// SetMTU implements stack.LinkEndpoint.SetMTU.
func (e *Endpoint) SetMTU(mtu uint32) { e.mtu.Store(mtu) }

// MaxHeaderLength implements stack.LinkEndpoint.MaxHeaderLength.
func (*Endpoint) MaxHeaderLength() uint16 { return HeaderLength }

// LinkAddress implements stack.LinkEndpoint.LinkAddress.
func (e *Endpoint) LinkAddress() tcpip.LinkAddress {
	if a := e.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// SetLinkAddress implements stack.LinkEndpoint.SetLinkAddress.
func (e *Endpoint) SetLinkAddress(addr tcpip.LinkAddress) { e.addr.Store(&addr) }

// Capabilities implements stack.LinkEndpoint.Capabilities. Ethernet needs ARP,
// and checksums are neither offloaded nor pre-verified.
func (*Endpoint) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityResolutionRequired
}

// Attach implements stack.LinkEndpoint.Attach.
func (e *Endpoint) Attach(dispatcher stack.NetworkDispatcher) {
	if dispatcher == nil {
		e.dispatcher.Store(nil)
		return
	}
	stamped, _ := dispatcher.(link.TimestampDispatcher)
	e.dispatcher.Store(&dispatcherRef{dispatcher, stamped})
}

// IsAttached implements stack.LinkEndpoint.IsAttached.
func (e *Endpoint) IsAttached() bool { return e.dispatcher.Load() != nil }

// Dispatcher returns the attached dispatcher, nil when detached.
func (e *Endpoint) Dispatcher() stack.NetworkDispatcher {
	if r := e.dispatcher.Load(); r != nil {
		return r.d
	}
	return nil
}

// Wait implements stack.LinkEndpoint.Wait. The base owns no goroutine; a link
// that starts goroutines overrides Wait to join them.
func (*Endpoint) Wait() {}

// ARPHardwareType implements stack.LinkEndpoint.ARPHardwareType.
func (*Endpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }

// AddHeader implements stack.LinkEndpoint.AddHeader: it pushes an Ethernet II
// header built from the packet's egress route.
func (*Endpoint) AddHeader(pkt *stack.PacketBuffer) {
	eth := header.Ethernet(pkt.LinkHeader().Push(HeaderLength))
	eth.Encode(&header.EthernetFields{
		SrcAddr: pkt.EgressRoute.LocalLinkAddress,
		DstAddr: pkt.EgressRoute.RemoteLinkAddress,
		Type:    pkt.NetworkProtocolNumber,
	})
}

// ParseHeader implements stack.LinkEndpoint.ParseHeader: it moves the first
// HeaderLength bytes of the packet into its link header and reports false
// when the packet is shorter than that.
func (*Endpoint) ParseHeader(pkt *stack.PacketBuffer) bool {
	_, ok := pkt.LinkHeader().Consume(HeaderLength)
	return ok
}

// Close implements stack.LinkEndpoint.Close: it runs the action set with
// SetOnCloseAction, once. A link that owns resources overrides Close and
// calls this one too.
func (e *Endpoint) Close() {
	e.mu.Lock()
	action := e.onClose
	e.onClose = nil
	e.closed = true
	e.mu.Unlock()
	if action != nil {
		action()
	}
}

// Closed reports whether Close was called.
func (e *Endpoint) Closed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// SetOnCloseAction implements stack.LinkEndpoint.SetOnCloseAction.
func (e *Endpoint) SetOnCloseAction(action func()) {
	e.mu.Lock()
	e.onClose = action
	e.mu.Unlock()
}

// DeliverFrame parses the Ethernet header of an inbound frame held in pkt
// (the whole frame in its payload, no header parsed yet), classifies it as
// host, broadcast, multicast or other-host traffic, and hands it to the
// attached dispatcher. It does NOT take ownership of pkt: the caller still
// holds its reference and drops it after DeliverFrame returns.
//
// It reports false, delivering nothing, when no dispatcher is attached or the
// frame is shorter than an Ethernet header.
func (e *Endpoint) DeliverFrame(pkt *stack.PacketBuffer) bool {
	return e.DeliverFrameAt(pkt, 0)
}

// DeliverFrameAt is DeliverFrame for a frame the link received at rx
// (nanoseconds since the Unix epoch; 0 for unknown), which it passes on to a
// dispatcher that takes it (link.TimestampDispatcher).
func (e *Endpoint) DeliverFrameAt(pkt *stack.PacketBuffer, rx int64) bool {
	r := e.dispatcher.Load()
	if r == nil {
		return false
	}
	d, own := r.d, e.LinkAddress()
	hdr, ok := pkt.LinkHeader().Consume(HeaderLength)
	if !ok {
		return false
	}
	eth := header.Ethernet(hdr)
	switch dst := eth.DestinationAddress(); {
	case dst == header.EthernetBroadcastAddress:
		pkt.PktType = tcpip.PacketBroadcast
	case header.IsMulticastEthernetAddress(dst):
		pkt.PktType = tcpip.PacketMulticast
	case dst == own:
		pkt.PktType = tcpip.PacketHost
	default:
		pkt.PktType = tcpip.PacketOtherHost
	}
	if r.stamped != nil && rx != 0 {
		r.stamped.DeliverNetworkPacketAt(eth.Type(), pkt, rx)
	} else {
		d.DeliverNetworkPacket(eth.Type(), pkt)
	}
	return true
}

// DeliverBytes copies frame into a new packet and delivers it as DeliverFrame
// does. It does NOT take ownership of frame: the bytes may be reused after
// the call returns.
func (e *Endpoint) DeliverBytes(frame []byte) bool {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	defer pkt.DecRef()
	return e.DeliverFrame(pkt)
}
