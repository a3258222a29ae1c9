package tickwire

import (
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
)

// Direct TCP delivery: a segment of a connection the program holds (a
// TCPConn from DialTCP or Accept, not yet closed) skips netstack's IPv4
// endpoint, NIC and transport demultiplexer: in latency mode every such
// segment, in stock mode one with payload that is handed to a waiting Read
// (handoff.go). The wire recognises its addresses and ports, parses the two
// headers as netstack would, and queues it to the TCP protocol itself
// (tcpProtocol.queueLocked, tcpProtocol.queueHeld).
// Those layers cost about a fifth of a round trip (address lookups,
// broadcast checks, statistics, a demultiplexer lock) and decide nothing for
// such a segment: it is addressed to the stack's one address, unfragmented,
// without IP options. Anything else (SYNs, fragments, IP options, unknown
// flows, endpoints no longer in a connected state) goes the stock way.

// flowKey names one direction of a TCP connection by the addresses and ports
// in its segments' headers: the direct delivery keys the segments a
// connection receives, the outbox the segments it sends.
type flowKey struct {
	addrs uint64 // source << 32 | destination
	ports uint32 // source << 16 | destination
}

// segmentFlow returns the flow of a segment from its IPv4 header (at least
// 20 bytes) and TCP header (at least 4).
func segmentFlow(ip header.IPv4, seg header.TCP) flowKey {
	return flowKey{addrs: uint64(be32(ip.SourceAddressSlice()))<<32 | uint64(be32(ip.DestinationAddressSlice())), ports: be32(seg)}
}

// slot hashes k into a table of ackFlows slots.
func (k flowKey) slot() int {
	h := k.addrs*0x9e3779b97f4a7c15 ^ uint64(k.ports)*0xc2b2ae3d27d4eb4f
	return int(h>>56) & (ackFlows - 1)
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// tcpFlows maps the connections the program holds, by the flow of the
// segments they receive, to their endpoints. Its size is the number of
// such connections, at most Config.MaxConnections.
//
// Lock order:
//
//	tcpFlows.mu
type tcpFlows struct {
	mu sync.RWMutex
	// +checklocks:mu
	m map[flowKey]*tcp.Endpoint
}

// inboundFlow returns the flow of ep's inbound segments, false when ep is
// not connected.
func inboundFlow(ep *tcp.Endpoint) (flowKey, bool) {
	info, ok := ep.Info().(*gstack.TransportEndpointInfo)
	if !ok || info.ID.RemoteAddress.BitLen() != 32 || info.ID.LocalAddress.BitLen() != 32 {
		return flowKey{}, false
	}
	remote, local := info.ID.RemoteAddress.As4(), info.ID.LocalAddress.As4()
	return flowKey{
		addrs: uint64(be32(remote[:]))<<32 | uint64(be32(local[:])),
		ports: uint32(info.ID.RemotePort)<<16 | uint32(info.ID.LocalPort),
	}, true
}

// inboundFlowOf is inboundFlow from a connection's local and remote
// addresses, which the caller has already read (it allocates nothing, where
// ep.Info does).
func inboundFlowOf(local, remote tcpip.FullAddress) (flowKey, bool) {
	if remote.Addr.BitLen() != 32 || local.Addr.BitLen() != 32 {
		return flowKey{}, false
	}
	r, l := remote.Addr.As4(), local.Addr.As4()
	return flowKey{
		addrs: uint64(be32(r[:]))<<32 | uint64(be32(l[:])),
		ports: uint32(remote.Port)<<16 | uint32(local.Port),
	}, true
}

// add registers ep.
func (f *tcpFlows) add(ep *tcp.Endpoint) {
	if key, ok := inboundFlow(ep); ok {
		f.addKey(key, ep)
	}
}

// addKey registers ep, whose inbound flow is key.
func (f *tcpFlows) addKey(key flowKey, ep *tcp.Endpoint) {
	f.mu.Lock()
	if f.m == nil {
		f.m = make(map[flowKey]*tcp.Endpoint)
	}
	f.m[key] = ep
	f.mu.Unlock()
}

// remove forgets ep.
func (f *tcpFlows) remove(ep *tcp.Endpoint) {
	if key, ok := inboundFlow(ep); ok {
		f.removeKey(key, ep)
	}
}

// removeKey forgets ep, whose inbound flow is key.
func (f *tcpFlows) removeKey(key flowKey, ep *tcp.Endpoint) {
	f.mu.Lock()
	if f.m[key] == ep {
		delete(f.m, key)
	}
	f.mu.Unlock()
}

func (f *tcpFlows) lookup(key flowKey) *tcp.Endpoint {
	f.mu.RLock()
	ep := f.m[key]
	f.mu.RUnlock()
	return ep
}

// claim finds the held connection pkt belongs to when pkt, an IPv4 packet
// addressed to self whose header checksum was checked, may skip netstack's
// network layer. It returns the connection's endpoint, locked (netstackunsafe.TryLock),
// and the segment's endpoint ID, or nil when the segment must go the stock
// way: not one that may skip, no such connection, the endpoint busy or no
// longer connected. The checks leave parse.IPv4 and parse.TCP no reason
// to fail on pkt.
func (f *tcpFlows) claim(pkt *gstack.PacketBuffer, self tcpip.Address) (*tcp.Endpoint, gstack.TransportEndpointID) {
	ep, ip, seg, _ := f.find(pkt, self)
	if ep == nil {
		return nil, gstack.TransportEndpointID{}
	}
	return lockFound(ep, ip, seg, self)
}

// find is claim without the lock: the held connection's endpoint, the
// segment's headers and its payload size, or a nil endpoint.
func (f *tcpFlows) find(pkt *gstack.PacketBuffer, self tcpip.Address) (*tcp.Endpoint, header.IPv4, header.TCP, int) {
	h, ok := pkt.Data().PullUp(header.IPv4MinimumSize + header.TCPMinimumSize)
	if !ok || h[0] != 0x45 || h[9] != uint8(header.TCPProtocolNumber) {
		return nil, nil, nil, 0 // not IPv4 without options carrying TCP
	}
	ip := header.IPv4(h)
	if ip.More() || ip.FragmentOffset() != 0 || ip.DestinationAddress() != self ||
		int(ip.TotalLength()) < len(h) || int(ip.TotalLength()) > pkt.Data().Size() {
		return nil, nil, nil, 0
	}
	seg := header.TCP(h[header.IPv4MinimumSize:])
	off := int(seg.DataOffset())
	if seg.Flags()&header.TCPFlagSyn != 0 || off < header.TCPMinimumSize ||
		header.IPv4MinimumSize+off > int(ip.TotalLength()) {
		return nil, nil, nil, 0 // SYNs and malformed segments: netstack answers and counts them
	}
	ep := f.lookup(segmentFlow(ip, seg))
	if ep == nil {
		return nil, nil, nil, 0
	}
	return ep, ip, seg, int(ip.TotalLength()) - header.IPv4MinimumSize - off
}

// lockFound locks ep, found by find for the segment with headers ip and
// seg, and returns it with the segment's endpoint ID; nil when ep is busy
// or no longer connected.
//
// +checklocksignore: TryLock, which checklocks cannot follow.
func lockFound(ep *tcp.Endpoint, ip header.IPv4, seg header.TCP, self tcpip.Address) (*tcp.Endpoint, gstack.TransportEndpointID) {
	if !netstackunsafe.TryLock(ep) {
		return nil, gstack.TransportEndpointID{}
	}
	// Held, ep cannot leave its state; one that is closing must not be
	// given segments its final drain of the queue may already have missed.
	if !netstackunsafe.Connected(ep.EndpointState()) {
		netstackunsafe.Unlock(ep)
		return nil, gstack.TransportEndpointID{}
	}
	id := gstack.TransportEndpointID{
		LocalPort:     seg.DestinationPort(),
		LocalAddress:  self,
		RemotePort:    seg.SourcePort(),
		RemoteAddress: tcpip.AddrFrom4Slice(ip.SourceAddressSlice()),
	}
	return ep, id
}
