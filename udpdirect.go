package tickwire

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Direct UDP delivery in brief. The Stack's udpTable owns the UDP port
// space (bind conflicts, ephemeral ports). A socket gets a netstack UDP
// endpoint, bound to its port (and connected), only when it needs one
// (UDPConn.endpoint): a connected socket at once; a listening socket when it
// joins a multicast group (netstack's IGMP keeps the membership), sends
// what direct delivery does not send (below), or when a datagram for its
// port is left to netstack (below), just before netstack looks for the
// endpoint. A netstack endpoint costs about 14 KB of heap; a listener
// without one costs under 1 KB, so 65,535 of them fit in 64 MiB. Around
// it:
//
//   - inbound, the wire hands each plain IPv4/UDP datagram (a fragmented
//     one once reassembled, frag.go) addressed to a port in the stack's
//     udpTable to its socket before netstack sees it (udpTable.deliver):
//     the socket's OnReceive handler runs on the delivering goroutine, or
//     the datagram is copied into the socket's ring (udpring.go, bounded
//     by UDPReceiveBuffer), which Read and ReadFrom drain without
//     allocating. Everything
//     else (ports nobody opened through tickwire, IP options, odd
//     addresses, a connected socket's datagrams from other peers) goes to
//     netstack as before, so ICMP port unreachable and every drop counter
//     keep working; what netstack then delivers to the socket's endpoint is
//     read from there too;
//   - outbound, a datagram to a unicast peer is built into a PacketBuffer
//     and written through a netstack route cached per socket (the last
//     udpRouteCache destinations), which adds the IPv4 header, resolves ARP
//     and fragments; broadcast and local destinations go through the
//     netstack endpoint.
//
// Direct delivery is always on: it does what netstack's UDP endpoint did with
// fewer locks, no per-datagram allocation and no goroutine of its own, and
// costs no CPU when idle. Only busy-polling (Config.BusyPoll) is tied to
// latency mode.

// maxUDPPayload is the largest datagram an IPv4 packet carries.
const maxUDPPayload = 65535 - header.IPv4MinimumSize - header.UDPMinimumSize

// udpVerdict is what direct delivery makes of an inbound IPv4 packet.
type udpVerdict uint8

const (
	udpPass        udpVerdict = iota // not direct delivery's: netstack handles it
	udpDeliver                       // a valid datagram for one of our addresses
	udpMalformed                     // UDP length field out of range
	udpBadChecksum                   // UDP checksum wrong
)

// udpDatagram is an inbound datagram as parseUDP4 found it. Payload aliases
// the packet.
type udpDatagram struct {
	src, dst tcpip.Address
	srcPort  uint16
	dstPort  uint16
	payload  []byte
	ip       uint64 // rxIPv4Valid | identification<<16 | flags and fragment offset word
}

// udpSelf is what parseUDP4 needs to know about the stack.
type udpSelf struct {
	addr, subnetBroadcast tcpip.Address
	checksummed           bool // the link verified the checksum (RX offload)
}

// parseUDP4 parses b, an IPv4 packet whose header checksum the wire has
// verified. It takes only the simple case: a 20-byte header, no fragment,
// protocol UDP, a total length within b, sent from an ordinary address to
// the stack's address or a broadcast address; anything else is udpPass, left
// to netstack, which applies its rules. The ports are set whenever the
// verdict is not udpPass, so the caller can tell whether the datagram is its
// to count as malformed. It never panics, whatever b holds.
func parseUDP4(b []byte, self *udpSelf) (udpDatagram, udpVerdict) {
	var d udpDatagram
	if len(b) < header.IPv4MinimumSize+header.UDPMinimumSize || b[0] != 0x45 {
		return d, udpPass
	}
	ip := header.IPv4(b)
	total := int(ip.TotalLength())
	if total < header.IPv4MinimumSize+header.UDPMinimumSize || total > len(b) ||
		binary.BigEndian.Uint16(b[6:])&0x3fff != 0 || // more fragments, or an offset
		ip.Protocol() != uint8(header.UDPProtocolNumber) {
		return d, udpPass
	}
	d.src, d.dst = ip.SourceAddress(), ip.DestinationAddress()
	if d.dst != self.addr && d.dst != header.IPv4Broadcast && d.dst != self.subnetBroadcast && !isMulticast4(d.dst) {
		return d, udpPass
	}
	// Sources netstack refuses (RFC 1122 3.2.1.3, martians, our own).
	if s := d.src.As4(); s[0] == 127 || s[0]&0xf0 == 0xe0 || d.src == header.IPv4Broadcast ||
		d.src == self.subnetBroadcast || d.src == self.addr {
		return d, udpPass
	}
	u := header.UDP(b[header.IPv4MinimumSize:total])
	d.srcPort, d.dstPort = u.SourcePort(), u.DestinationPort()
	ulen := int(u.Length())
	if ulen < header.UDPMinimumSize || ulen > len(u) {
		return d, udpMalformed
	}
	u = u[:ulen]
	if !self.checksummed && u.Checksum() != 0 {
		sum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, d.src, d.dst, uint16(ulen))
		if checksum.Checksum(u, sum) != 0xffff {
			return d, udpBadChecksum
		}
	}
	d.payload = u[header.UDPMinimumSize:]
	d.ip = rxIPv4Valid | uint64(ip.ID())<<16 | uint64(binary.BigEndian.Uint16(b[6:]))
	return d, udpDeliver
}

// udpTable maps the local ports of a Stack's UDP sockets to the sockets, for
// the wire. Lookups take no lock: two atomic loads, the page of 256 ports
// and the port's slot in it. A page is allocated when a socket first opens
// one of its ports and kept (2 KiB, at most 512 KiB for all 65,536 ports),
// so that opening and closing a socket costs the same however many are
// open (a map replaced whole on every change made opening n sockets cost
// n^2).
type udpTable struct {
	self  udpSelf
	stats tcpip.UDPStats // netstack's counters, which Stats reports
	pages [256]atomic.Pointer[udpPortPage]
	open  atomic.Int32 // sockets registered
	mu    sync.Mutex   // serialises add and remove
	// used counts each page's sockets, so that the search for a free
	// ephemeral port skips full pages.
	// +checklocks:mu
	used [256]uint16

	// mcast holds the sockets' multicast memberships (multicast.go),
	// replaced, never changed, under mcastMu.
	mcast    atomic.Pointer[map[mcastKey]*UDPConn]
	mcastMu  sync.Mutex
	notForUs *tcpip.StatCounter // Stats.DropIPv4NotForUs
}

// udpPortPage holds the sockets of 256 consecutive ports.
type udpPortPage [256]atomic.Pointer[UDPConn]

// The defaults and ranges of Config.UDPReceiveQueue (datagrams) and
// Config.UDPReceiveBuffer (bytes).
const (
	DefaultUDPReceiveQueue  = 1 << 16
	MaxUDPReceiveQueue      = 1 << 16
	DefaultUDPReceiveBuffer = 1 << 20
	MinUDPReceiveBuffer     = 4096
	MaxUDPReceiveBuffer     = 1 << 30
)

func newUDPTable(s *Stack) *udpTable {
	t := &udpTable{stats: s.st.Stats().UDP, notForUs: s.st.Stats().IP.InvalidDestinationAddressesReceived}
	p := s.cfg.Addr
	t.self.addr = tcpip.AddrFrom4(p.Addr().As4())
	if p.Bits() < 31 {
		bc := p.Addr().As4()
		host := ^uint32(0) >> p.Bits()
		binary.BigEndian.PutUint32(bc[:], binary.BigEndian.Uint32(bc[:])|host)
		t.self.subnetBroadcast = tcpip.AddrFrom4(bc)
	} else {
		t.self.subnetBroadcast = header.IPv4Broadcast
	}
	t.self.checksummed = s.cfg.Link.Capabilities()&gstack.CapabilityRXChecksumOffload != 0
	return t
}

// The ephemeral ports, netstack's: ListenUDP(0) and DialUDP pick one at
// random in this range, then the next free one.
const (
	firstEphemeralPort = 16000
	numEphemeralPorts  = 1<<16 - firstEphemeralPort
)

// add registers c on port, or on a free ephemeral port when port is 0, and
// sets c.port before c is visible to the wire. It fails with
// syscall.EADDRINUSE when port is taken and with syscall.EAGAIN when every
// ephemeral port is, as netstack's Bind did.
func (t *udpTable) add(port uint16, c *UDPConn) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if port == 0 {
		start := rand.N(numEphemeralPorts)
		for i := 0; i < numEphemeralPorts; {
			p := uint16(firstEphemeralPort + (start+i)%numEphemeralPorts)
			if t.used[p>>8] == 256 {
				i += 256 - int(p&0xff) // the rest of a full page
				continue
			}
			if t.lookup(p) == nil {
				port = p
				break
			}
			i++
		}
		if port == 0 {
			return syscall.EAGAIN
		}
	}
	p := t.pages[port>>8].Load()
	if p == nil {
		p = new(udpPortPage)
		t.pages[port>>8].Store(p)
	}
	if p[port&0xff].Load() != nil {
		return syscall.EADDRINUSE
	}
	c.port = port
	p[port&0xff].Store(c)
	t.used[port>>8]++
	t.open.Add(1)
	return nil
}

// remove unregisters c from port, if it is still registered there.
func (t *udpTable) remove(port uint16, c *UDPConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pages[port>>8].Load(); p != nil && p[port&0xff].CompareAndSwap(c, nil) {
		t.used[port>>8]--
		t.open.Add(-1)
		t.dropMemberships(port, c)
	}
}

// close drops the cached routes of every socket still open, at the
// Stack's Close (they hold references on netstack's routes), and wakes
// their blocked reads.
func (t *udpTable) close() {
	for i := range t.pages {
		p := t.pages[i].Load()
		if p == nil {
			continue
		}
		for j := range p {
			if c := p[j].Load(); c != nil {
				c.dropRoutes()
				signal(c.readCh) // a blocked read returns net.ErrClosed
			}
		}
	}
}

// lookup returns the socket on port, nil if none.
func (t *udpTable) lookup(port uint16) *UDPConn {
	if p := t.pages[port>>8].Load(); p != nil {
		return p[port&0xff].Load()
	}
	return nil
}

// deliver takes pkt, an inbound IPv4 packet (network header not yet
// parsed), when it is a datagram for a socket of the table, reporting true:
// the wire then drops its reference as usual. It does NOT take ownership of
// pkt; the socket copies what it keeps. Reporting false leaves pkt to
// netstack. A nil table takes nothing.
func (t *udpTable) deliver(pkt *gstack.PacketBuffer, rx int64) bool {
	if t == nil {
		return false
	}
	if t.open.Load() == 0 {
		return false
	}
	// A first look at the fixed headers spares the full pull-up (which may
	// copy) for packets that are not ours.
	h, ok := pkt.Data().PullUp(header.IPv4MinimumSize + header.UDPMinimumSize)
	if !ok || h[9] != uint8(header.UDPProtocolNumber) {
		return false
	}
	if h[0] != 0x45 {
		t.toNetstack(pkt) // IP options
		return false
	}
	c := t.lookup(binary.BigEndian.Uint16(h[header.IPv4MinimumSize+2:]))
	if c == nil {
		return false
	}
	total := int(binary.BigEndian.Uint16(h[2:]))
	b, ok := pkt.Data().PullUp(total)
	if !ok {
		return false
	}
	d, v := parseUDP4(b, &t.self)
	switch v {
	case udpPass:
		c.endpoint() // netstack decides; if it delivers, it is to the socket's endpoint
		return false
	case udpMalformed:
		t.stats.MalformedPacketsReceived.Increment()
		return true
	case udpBadChecksum:
		t.stats.ChecksumErrors.Increment()
		return true
	}
	if c.connected && (d.src != c.remote || d.srcPort != c.remotePort) {
		return false // netstack's connected endpoint refuses it, as before
	}
	if isMulticast4(d.dst) && !t.joined(d.dstPort, d.dst, c) {
		t.notForUs.Increment() // a group this socket did not join
		return true
	}
	if len(d.payload) > c.ring.maxPayload && !c.recv.set.Load() {
		c.endpoint()
		return false // larger than the link's MTU said: netstack's endpoint holds it
	}
	from := netip.AddrPortFrom(netip.AddrFrom4(d.src.As4()), d.srcPort)
	switch c.receive(d.payload, from, rx, groupOf(d.dst), d.ip) {
	case tooLarge:
		c.endpoint()
		return false // the handler is busy: netstack's endpoint holds it until its goroutine runs
	case ringFull:
		t.stats.ReceiveBufferErrors.Increment()
	}
	t.stats.PacketsReceived.Increment()
	return true
}

// toNetstack readies what netstack needs for pkt, a UDP packet with IP
// options that direct delivery leaves to it: the netstack endpoint of the
// socket on its destination port, if any.
func (t *udpTable) toNetstack(pkt *gstack.PacketBuffer) {
	h, ok := pkt.Data().PullUp(header.IPv4MinimumSize)
	if !ok || h[0]>>4 != 4 {
		return
	}
	ihl := int(h[0]&0xf) * 4
	if ihl < header.IPv4MinimumSize {
		return
	}
	if b, ok := pkt.Data().PullUp(ihl + header.UDPMinimumSize); ok {
		if c := t.lookup(binary.BigEndian.Uint16(b[ihl+2:])); c != nil {
			c.endpoint()
		}
	}
}

// udpRoute is a cached netstack route to one destination. refs counts the
// cache's reference and one per write in progress; the route is released
// when the count drops to zero.
type udpRoute struct {
	r    *gstack.Route
	to   tcpip.Address
	refs atomic.Int32
}

// acquire takes a reference, reporting false when the route is released.
func (e *udpRoute) acquire() bool {
	for {
		n := e.refs.Load()
		if n <= 0 {
			return false
		}
		if e.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (e *udpRoute) release() {
	if e.refs.Add(-1) == 0 {
		e.r.Release()
	}
}

// udpRouteCache is the number of destinations a socket keeps a route to:
// enough for a server answering a few peers in turn; beyond it, routes are
// replaced in turn (each new one costs a netstack FindRoute, which
// allocates).
const udpRouteCache = 4

// route returns the cached route to `to` with a reference taken, finding
// and caching it on a miss; nil when direct delivery cannot send there
// (broadcast, our own address, no route: the netstack endpoint then sends,
// or reports the error).
func (c *UDPConn) route(to tcpip.Address) *udpRoute {
	if isMulticast4(to) && c.mcastLoop.Load() {
		return nil // the netstack endpoint loops the datagram back
	}
	for i := range c.routes {
		if e := c.routes[i].Load(); e != nil && e.to == to && e.acquire() {
			return e
		}
	}
	c.routeMu.Lock()
	if c.closed.Load() || c.s.closed.Load() { // a route cached now would never be released
		c.routeMu.Unlock()
		return nil
	}
	for i := range c.routes {
		if e := c.routes[i].Load(); e != nil && e.to == to && e.acquire() {
			c.routeMu.Unlock()
			return e
		}
	}
	r, err := c.s.st.FindRoute(nicID, c.local, to, ipv4.ProtocolNumber, false)
	if err != nil {
		c.routeMu.Unlock()
		return nil
	}
	if r.IsOutboundBroadcast() || r.Loop()&gstack.PacketLoop != 0 || to == c.local {
		r.Release()
		c.routeMu.Unlock()
		return nil
	}
	e := &udpRoute{r: r, to: to}
	e.refs.Store(2) // the cache's and the caller's
	old := c.routes[c.nextRoute].Swap(e)
	c.nextRoute = (c.nextRoute + 1) % udpRouteCache
	c.routeMu.Unlock()
	if old != nil {
		old.release()
	}
	return e
}

// dropRoutes releases the cached routes (at Close).
func (c *UDPConn) dropRoutes() {
	c.routeMu.Lock()
	var old [udpRouteCache]*udpRoute
	for i := range c.routes {
		old[i] = c.routes[i].Swap(nil)
	}
	c.routeMu.Unlock()
	for _, e := range old {
		if e != nil {
			e.release()
		}
	}
}

// sendDirect writes b as one datagram to to:port over route e. It does NOT
// take ownership of b: the bytes are copied into the packet.
func (c *UDPConn) sendDirect(e *udpRoute, b []byte, port uint16) tcpip.Error {
	r := e.r
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{
		ReserveHeaderBytes: header.UDPMinimumSize + int(r.MaxHeaderLength()),
		Payload:            buffer.MakeWithData(b),
	})
	defer pkt.DecRef()
	length := uint16(header.UDPMinimumSize + len(b))
	u := header.UDP(pkt.TransportHeader().Push(header.UDPMinimumSize))
	pkt.TransportProtocolNumber = header.UDPProtocolNumber
	u.Encode(&header.UDPFields{SrcPort: c.port, DstPort: port, Length: length})
	if r.RequiresTXTransportChecksum() {
		sum := checksum.Combine(header.PseudoHeaderChecksum(header.UDPProtocolNumber, c.local, e.to, length), checksum.Checksum(b, 0))
		sum = u.CalculateChecksum(sum)
		if sum != 0xffff { // a zero checksum would mean "none": send all ones instead (RFC 768)
			sum = ^sum
		}
		u.SetChecksum(sum)
	}
	// DF as netstack's default (PMTUDiscoveryWant) and Linux set it, but only
	// on datagrams that fit the MTU: the fragments of a larger one need an
	// IPv4 ID, which netstack draws from its secure RNG (one allocation).
	df := int(length)+header.IPv4MinimumSize <= int(r.MTU())
	ttl := r.DefaultTTL()
	if isMulticast4(e.to) {
		ttl = c.multicastTTL()
	}
	params := gstack.NetworkHeaderParams{Protocol: header.UDPProtocolNumber, TTL: ttl, TOS: uint8(c.tos.Load()), DF: df}
	if err := r.WritePacket(params, pkt); err != nil {
		c.t.stats.PacketSendErrors.Increment()
		return err
	}
	c.t.stats.PacketsSent.Increment()
	return nil
}
