package tickwire

import (
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/header/parse"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// In latency mode, a segment of a connection the program holds (a TCPConn
// from DialTCP or Accept, not yet closed) skips netstack's IPv4 endpoint,
// NIC and transport demultiplexer: the wire recognises its addresses and
// ports, parses the two headers as netstack would, and queues it to the TCP
// protocol itself (syncTCP.QueuePacket). Those layers cost about a fifth of
// a round trip (address lookups, broadcast checks, statistics, a
// demultiplexer lock) and decide nothing for such a segment: it is
// addressed to the stack's one address, unfragmented, without IP options.
// Anything else (SYNs, fragments, IP options, unknown flows, endpoints no
// longer in a connected state) goes the stock way.

// tcpFlow names a connection by the addresses and ports of the segments it
// receives.
type tcpFlow struct {
	addrs uint64 // source << 32 | destination
	ports uint32 // source << 16 | destination
}

// tcpFlows maps the connections the program holds to their endpoints.
//
// Lock order:
//
//	tcpFlows.mu
type tcpFlows struct {
	mu sync.RWMutex
	// +checklocks:mu
	m map[tcpFlow]*tcp.Endpoint
}

// flowOf returns the flow of ep's inbound segments, false when ep is not
// connected.
func flowOf(ep *tcp.Endpoint) (tcpFlow, bool) {
	info, ok := ep.Info().(*gstack.TransportEndpointInfo)
	if !ok || info.ID.RemoteAddress.BitLen() != 32 || info.ID.LocalAddress.BitLen() != 32 {
		return tcpFlow{}, false
	}
	remote, local := info.ID.RemoteAddress.As4(), info.ID.LocalAddress.As4()
	return tcpFlow{
		addrs: uint64(be32(remote[:]))<<32 | uint64(be32(local[:])),
		ports: uint32(info.ID.RemotePort)<<16 | uint32(info.ID.LocalPort),
	}, true
}

// add registers ep.
func (f *tcpFlows) add(ep *tcp.Endpoint) {
	key, ok := flowOf(ep)
	if !ok {
		return
	}
	f.mu.Lock()
	if f.m == nil {
		f.m = make(map[tcpFlow]*tcp.Endpoint)
	}
	f.m[key] = ep
	f.mu.Unlock()
}

// remove forgets ep.
func (f *tcpFlows) remove(ep *tcp.Endpoint) {
	key, ok := flowOf(ep)
	if !ok {
		return
	}
	f.mu.Lock()
	if f.m[key] == ep {
		delete(f.m, key)
	}
	f.mu.Unlock()
}

func (f *tcpFlows) lookup(key tcpFlow) *tcp.Endpoint {
	f.mu.RLock()
	ep := f.m[key]
	f.mu.RUnlock()
	return ep
}

// deliverTCP queues pkt, an IPv4 packet whose header checksum was checked,
// straight to its connection's endpoint when it may skip netstack's network
// layer (see above), reporting whether it did. frozen: see wire.deliver. The endpoint must be free
// (TryLock): when it is not, the segment goes the stock way.
// +checklocksignore: TryLock, which checklocks cannot follow.
func (w *wire) deliverTCP(pkt *gstack.PacketBuffer, frozen *bool) bool {
	sy := w.sy
	if sy == nil || sy.tcp == nil || !sy.inlineAllowed() {
		return false
	}
	h, ok := pkt.Data().PullUp(header.IPv4MinimumSize + header.TCPMinimumSize)
	if !ok || h[0] != 0x45 || h[9] != uint8(header.TCPProtocolNumber) {
		return false // not IPv4 without options carrying TCP
	}
	ip := header.IPv4(h)
	if ip.More() || ip.FragmentOffset() != 0 || ip.DestinationAddress() != w.addr ||
		int(ip.TotalLength()) < len(h) || int(ip.TotalLength()) > pkt.Data().Size() {
		return false
	}
	seg := header.TCP(h[header.IPv4MinimumSize:])
	if off := int(seg.DataOffset()); seg.Flags()&header.TCPFlagSyn != 0 || off < header.TCPMinimumSize ||
		header.IPv4MinimumSize+off > int(ip.TotalLength()) {
		return false // SYNs and malformed segments: netstack answers and counts them
	}
	src, dst := ip.SourceAddressSlice(), ip.DestinationAddressSlice()
	key := tcpFlow{addrs: uint64(be32(src))<<32 | uint64(be32(dst)), ports: be32(seg)}
	ep := sy.flows.lookup(key)
	if ep == nil || !ep.TryLock() {
		return false
	}
	// Held, ep cannot leave its state; one that is closing must not be
	// given segments its final drain of the queue may already have missed.
	if !syncState(ep.EndpointState()) {
		unlockEndpoint(ep)
		return false
	}
	id := gstack.TransportEndpointID{
		LocalPort:     seg.DestinationPort(),
		LocalAddress:  w.addr,
		RemotePort:    seg.SourcePort(),
		RemoteAddress: tcpip.AddrFrom4Slice(src),
	}
	if !parse.IPv4(pkt) || !parse.TCP(pkt) {
		unlockEndpoint(ep)
		return true // unreachable: the checks above leave neither parse a reason to fail
	}
	pkt.RXChecksumValidated = w.Capabilities()&gstack.CapabilityRXChecksumOffload != 0
	w.counters.tcpDirect.Add(1)
	if frozen != nil && !*frozen {
		*frozen = sy.clock.freeze() // one clock reading for this segment's processing
	}
	sy.tcp.queueLocked(ep, id, pkt)
	return true
}
