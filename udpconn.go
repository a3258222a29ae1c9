package tickwire

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/tickwire/tickwire/internal/rxclock"
)

// UDPHandler receives a socket's datagrams (see UDPConn.OnReceive). payload
// is valid until the handler returns and must not be modified: it may share
// memory with the received frame. from is the sender.
type UDPHandler func(c *UDPConn, payload []byte, from netip.AddrPort)

// UDPConn is a UDP socket from ListenUDP, DialUDP or ServeUDP. It implements
// net.PacketConn and, connected (DialUDP), net.Conn; ReadFromUDPAddrPort and
// WriteToUDPAddrPort are the allocation-free pair, as on *net.UDPConn, and
// OnReceive is the handler API.
//
// Datagrams bypass netstack's UDP endpoint, in both modes: tickwire's link
// wrapper hands each datagram for the socket's port to the socket on the
// goroutine that delivers the frame, where it waits in a ring bounded by
// Config.UDPReceiveBuffer until read (when the ring is full it is
// dropped and counted in Stats.DropUDPBufferFull) or goes straight to the
// OnReceive handler; a fragmented datagram takes the same way once the link
// wrapper has reassembled it. Datagrams with IP options, datagrams larger
// than the link MTU - 28 for a socket without a handler and broadcasts
// sent by the socket still go through netstack, transparently.
// Writes never block: a datagram goes to the link before Write returns (or
// is dropped by the link, which counts it). Sending to a broadcast address
// is refused, as netstack refuses it without SO_BROADCAST.
//
// All methods are safe for concurrent use; concurrent reads are serialised.
// ReadFromUDPAddrPort, Read, Write and WriteToUDPAddrPort allocate nothing
// in steady state; ReadFrom allocates the address it returns.
//
// Lock order (OnReceive installs the handler under readMu; the user's
// UDPHandler runs holding recv.mu, and its writes through netstack take
// epMu while the netstack endpoint is made, then writeMu; reads through
// netstack take its readMu; routeMu is taken on a route cache miss;
// JoinGroup takes epMu under the table's mcastMu):
//
//	UDPConn.readMu
//	  UDPConn.recv.mu
//	    netstackEP.readMu
//	    the user's UDPHandler
//	      udpTable.mcastMu
//	        UDPConn.epMu
//	      netstackEP.writeMu, UDPConn.routeMu
type UDPConn struct {
	sock
	s     *Stack
	t     *udpTable
	laddr *net.UDPAddr
	raddr *net.UDPAddr // nil when not connected

	local tcpip.Address
	port  uint16
	// connected sockets receive only from remote:remotePort.
	connected  bool
	remote     tcpip.Address
	remotePort uint16

	queue waiter.Queue // sock.wq
	ring  udpRing
	// tos is the IPv4 TOS byte of the datagrams sent directly (SetTOS).
	tos atomic.Uint32
	// rx is the receive time of the datagram the handler is handling or
	// the last read returned (RxTime).
	rx atomic.Int64
	// rxGroup is the multicast group of that datagram (RxGroup), 0 for
	// unicast.
	rxGroup atomic.Uint32
	// rxIP is its IPv4 identification and flags (RxIPv4ID): rxIPv4Valid |
	// identification<<16 | the flags and fragment offset word; 0 when
	// netstack delivered it.
	rxIP atomic.Uint64
	// mcastTTL is SetMulticastTTL's value plus one (0: the default, 1);
	// mcastLoop is SetMulticastLoopback's (multicast.go).
	mcastTTL  atomic.Uint32
	mcastLoop atomic.Bool

	readMu sync.Mutex

	// recv is OnReceive's state.
	recv struct {
		set     atomic.Bool
		handler UDPHandler // immutable once set is true
		// mu serialises handler calls.
		mu sync.Mutex
		// +checklocks:mu
		buf []byte // for datagrams read from the ring and the netstack endpoint
	}

	// routes caches the routes to the last destinations written to; writes
	// load them without a lock, routeMu serialises their replacement.
	routes  [udpRouteCache]atomic.Pointer[udpRoute]
	routeMu sync.Mutex
	// +checklocks:routeMu
	nextRoute int // the entry the next miss replaces

	// nsep is the netstack endpoint, nil until the socket first needs one
	// (endpoint); epMu serialises its creation, its closing and the
	// options applied to it.
	nsep atomic.Pointer[netstackEP]
	epMu sync.Mutex
}

var (
	_ net.PacketConn = (*UDPConn)(nil)
	_ net.Conn       = (*UDPConn)(nil)
)

// netstackEP is a socket's netstack endpoint (see UDPConn.endpoint) and
// the state of reads and writes through it, kept here rather than in the
// UDPConn so that a socket without one stays small. The state is in fields
// so that the writer, reader and address handed to netstack do not escape
// to the heap on each call.
type netstackEP struct {
	ep tcpip.Endpoint

	readMu sync.Mutex
	// +checklocks:readMu
	rw tcpip.SliceWriter

	// writeMu serialises the writes: datagrams direct delivery does not
	// send (broadcast, local, multicast looped back).
	writeMu sync.Mutex
	// +checklocks:writeMu
	wr bytes.Reader
	// +checklocks:writeMu
	to tcpip.FullAddress
}

// read reads one datagram into b.
func (e *netstackEP) read(b []byte, opts tcpip.ReadOptions) (tcpip.ReadResult, tcpip.Error) {
	e.readMu.Lock()
	defer e.readMu.Unlock()
	e.rw = b
	res, err := e.ep.Read(&e.rw, opts)
	e.rw = nil
	return res, err
}

// udpEndpoint opens a UDP socket bound to local.Port (0: a free ephemeral
// port) and, when remote is not nil, connected to it, and registers it for
// direct delivery. The port is taken in the Stack's udpTable, which owns
// the UDP port space: netstack learns of it only when the socket needs a
// netstack endpoint (see UDPConn.endpoint), which a connected socket does at
// once (netstack's Connect checks the route) and a listening socket only
// when it first sends or receives what direct delivery does not handle.
func (s *Stack) udpEndpoint(local tcpip.FullAddress, remote *tcpip.FullAddress) (*UDPConn, error) {
	if s.closed.Load() {
		return nil, net.ErrClosed
	}
	c := &UDPConn{s: s, t: s.wire.udp, local: s.wire.udp.self.addr}
	c.initReadOnly(&c.queue, nil, &s.cfg)
	if remote != nil {
		c.connected, c.remote, c.remotePort = true, remote.Addr, remote.Port
		c.raddr = &net.UDPAddr{IP: remote.Addr.AsSlice(), Port: int(remote.Port)}
	}
	c.ring.init(s.cfg.UDPReceiveQueue, s.cfg.UDPReceiveBuffer, s.udpDirectMax())
	if err := c.t.add(local.Port, c); err != nil {
		c.shut()
		return nil, err
	}
	c.laddr = &net.UDPAddr{IP: s.cfg.Addr.Addr().AsSlice(), Port: int(c.port)}
	if remote != nil {
		if _, err := c.endpoint(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// endpoint returns c's netstack endpoint, creating it on first use: bound
// to c's port, connected when c is, with c's options applied. It costs
// about 14 KB of heap, which is why a socket that direct delivery serves
// alone (unicast and multicast datagrams in and out) never has one. It
// fails with net.ErrClosed once c or the Stack is closed.
func (c *UDPConn) endpoint() (*netstackEP, error) {
	if e := c.nsep.Load(); e != nil {
		return e, nil
	}
	c.epMu.Lock()
	defer c.epMu.Unlock()
	if e := c.nsep.Load(); e != nil {
		return e, nil
	}
	if c.closed.Load() || c.s.closed.Load() {
		return nil, net.ErrClosed
	}
	ep, err := c.s.st.NewEndpoint(udp.ProtocolNumber, ipv4.ProtocolNumber, c.wq)
	if err != nil {
		return nil, convertError(err)
	}
	if err := c.setupEndpoint(ep); err != nil {
		ep.Close()
		return nil, convertError(err)
	}
	// The Stack's Close stores closed before it closes netstack's
	// endpoints: either it closes this one, or this sees closed.
	if c.s.closed.Load() {
		ep.Close()
		return nil, net.ErrClosed
	}
	e := &netstackEP{ep: ep}
	c.nsep.Store(e)
	return e, nil
}

// setupEndpoint binds (and connects) a new netstack endpoint for c and
// applies c's options.
//
// +checklocks:c.epMu
func (c *UDPConn) setupEndpoint(ep tcpip.Endpoint) tcpip.Error {
	if err := ep.Bind(tcpip.FullAddress{NIC: nicID, Port: c.port}); err != nil {
		return err
	}
	if c.connected {
		if err := ep.Connect(tcpip.FullAddress{NIC: nicID, Addr: c.remote, Port: c.remotePort}); err != nil {
			return err
		}
	}
	ep.SocketOptions().SetMulticastLoop(c.mcastLoop.Load())
	ep.SocketOptions().SetReceivePacketInfo(true) // the destination, for RxGroup
	if ttl := c.mcastTTL.Load(); ttl > 0 {
		if err := ep.SetSockOptInt(tcpip.MulticastTTLOption, int(ttl-1)); err != nil {
			return err
		}
	}
	if tos := c.tos.Load(); tos != 0 {
		if err := ep.SetSockOptInt(tcpip.IPv4TOSOption, int(tos)); err != nil {
			return err
		}
	}
	return nil
}

// setOption stores an option of c with store and, when c has a netstack
// endpoint, applies it there with apply, under epMu so that an endpoint
// created meanwhile applies it too.
func (c *UDPConn) setOption(store func(), apply func(ep tcpip.Endpoint) tcpip.Error) error {
	c.epMu.Lock()
	defer c.epMu.Unlock()
	if e := c.nsep.Load(); e != nil {
		if err := apply(e.ep); err != nil {
			return c.cause(err)
		}
	}
	store()
	return nil
}

// closeEndpoint closes c's netstack endpoint, if it has one; after Close
// (closed set) no new one is created.
func (c *UDPConn) closeEndpoint() {
	c.epMu.Lock()
	defer c.epMu.Unlock()
	if e := c.nsep.Load(); e != nil {
		e.ep.Close()
	}
}

// udpDirectMax is the largest datagram direct delivery takes in one frame.
func (s *Stack) udpDirectMax() int {
	mtu := max(s.cfg.MTU, int(s.cfg.Link.MTU()))
	return mtu - 28 // IPv4 and UDP headers
}

func (c *UDPConn) opError(op string, addr net.Addr, err error) error {
	if addr == nil && c.raddr != nil {
		addr = c.raddr
	}
	return opError(op, "udp", c.laddr, addr, err)
}

// receipt is what became of a datagram handed to receive.
type receipt uint8

const (
	received receipt = iota // handed to the handler or queued in the ring
	ringFull                // dropped: the ring was full
	tooLarge                // not taken: larger than the ring takes
)

// receive hands a directly delivered datagram to the socket: to its handler
// when it has one and nobody is running it, after the datagrams waiting in
// the ring (else to the ring, for whoever runs the handler next, so that
// order is kept and the delivering goroutine never waits), or to the ring.
// A datagram larger than the ring takes (ring.maxPayload) that cannot go
// to the handler at once is not taken (tooLarge): the caller leaves it to
// netstack's endpoint, whose datagrams the socket's goroutine hands to the
// handler. rx is the datagram's receive time.
// +checklocksignore: TryLock, which checklocks cannot follow.
func (c *UDPConn) receive(payload []byte, from netip.AddrPort, rx int64, group uint32, ip uint64) receipt {
	if c.recv.set.Load() && c.recv.mu.TryLock() {
		c.drainRingLocked() // what waits there came first
		if !c.closed.Load() {
			c.rx.Store(rx)
			c.rxGroup.Store(group)
			c.rxIP.Store(ip)
			c.recv.handler(c, payload, from)
		}
		c.recv.mu.Unlock()
		return received
	}
	if len(payload) > c.ring.maxPayload {
		return tooLarge
	}
	if !c.ring.push(payload, from, rx, group, ip) {
		return ringFull
	}
	signal(c.readCh)
	return received
}

// OnReceive switches c to the handler API: from now on, handler is
// called with each datagram c receives, one call at a time, and reads fail
// with ErrHandlerSet. A datagram delivered directly is handed to the
// handler on the goroutine that delivered the frame (the link's reader, or
// the peer's writer over link/pipe), before the delivery returns: no
// goroutine is woken between the wire and the handler, and a reply written
// from the handler leaves on that same goroutine. Datagrams received before
// the call, those that arrive while the handler runs on another goroutine,
// and those netstack delivers (IP options) are handed over by a
// goroutine of the socket's own.
//
// The handler may call WriteToUDPAddrPort, Write and Close on c or other
// sockets (writes never block), and must not block: while it runs, the
// delivering goroutine delivers nothing else. Use OnReceive for
// request/response and market data on the hot path; use ReadFrom when a
// goroutine per socket and a wake-up per datagram are acceptable.
//
// OnReceive fails with ErrHandlerSet when c already has a handler and
// with net.ErrClosed after Close.
func (c *UDPConn) OnReceive(handler UDPHandler) error {
	if handler == nil {
		return c.opError("receive", nil, errors.New("tickwire: nil handler"))
	}
	c.readMu.Lock() // no read in progress from here on
	defer c.readMu.Unlock()
	if c.closed.Load() {
		return c.opError("receive", nil, net.ErrClosed)
	}
	if c.recv.set.Load() {
		return c.opError("receive", nil, ErrHandlerSet)
	}
	c.recv.handler = handler
	c.recv.set.Store(true)
	c.s.goroutines.Add(1)
	go c.receiveLoop()
	return nil
}

// receiveLoop hands the handler what direct delivery could not: datagrams in
// the ring and datagrams netstack delivered to the endpoint. It ends at
// Close or at the Stack's Close.
func (c *UDPConn) receiveLoop() {
	defer c.s.goroutines.Done()
	c.handlerLoop(c.s.done, func() (found, finished bool) { return c.drain(), false })
}

// drain calls the handler for every waiting datagram, reporting whether
// there was any.
func (c *UDPConn) drain() bool {
	r := &c.recv
	r.mu.Lock()
	defer r.mu.Unlock()
	got := false
	for !c.closed.Load() {
		if c.drainRingLocked() {
			got = true
		}
		e := c.nsep.Load()
		if e == nil {
			return got
		}
		buf := c.recvBufLocked()
		res, err := e.read(buf, tcpip.ReadOptions{NeedRemoteAddr: true})
		if err != nil {
			return got // would block, or closed: the loop's select sees Close
		}
		c.rx.Store(netstackRxTime(res))
		c.rxGroup.Store(netstackRxGroup(res))
		c.rxIP.Store(0)
		r.handler(c, buf[:res.Count], netip.AddrPortFrom(netip.AddrFrom4(res.RemoteAddr.Addr.As4()), res.RemoteAddr.Port))
		got = true
	}
	return got
}

// drainRingLocked calls the handler for every datagram in the ring,
// reporting whether there was any.
//
// +checklocks:c.recv.mu
func (c *UDPConn) drainRingLocked() bool {
	r := &c.recv
	got := false
	for !c.closed.Load() && c.ring.queued() {
		n, from, rx, group, ip, ok := c.ring.pop(c.recvBufLocked())
		if !ok {
			break
		}
		c.rx.Store(rx)
		c.rxGroup.Store(group)
		c.rxIP.Store(ip)
		r.handler(c, r.buf[:n], from)
		got = true
	}
	return got
}

// ServeUDP opens a UDP socket on port (0 picks a free port) with handler
// installed (see OnReceive).
func (s *Stack) ServeUDP(port uint16, handler UDPHandler) (*UDPConn, error) {
	if handler == nil {
		return nil, opError("listen", "udp", nil, nil, errors.New("tickwire: nil handler"))
	}
	c, err := s.ListenUDP(port)
	if err != nil {
		return nil, err
	}
	if err := c.OnReceive(handler); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// read receives one datagram into b (truncating it to len(b)).
func (c *UDPConn) read(b []byte, from *netip.AddrPort) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.recv.set.Load() {
		return 0, ErrHandlerSet
	}
	expired := c.rd.expired()
	spin := spinner{budget: c.busyPoll}
	for {
		if err := c.check(expired); err != nil {
			return 0, err
		}
		if n, f, rx, group, ip, ok := c.ring.pop(b); ok {
			if from != nil {
				*from = f
			}
			c.rx.Store(rx)
			c.rxGroup.Store(group)
			c.rxIP.Store(ip)
			return n, nil
		}
		e := c.nsep.Load()
		if e == nil {
			if c.s.closed.Load() {
				return 0, net.ErrClosed
			}
			if !spin.again() {
				c.waitReadable()
			}
			continue
		}
		res, err := e.read(b, tcpip.ReadOptions{NeedRemoteAddr: from != nil})
		switch err.(type) {
		case nil:
			if from != nil {
				*from = netip.AddrPortFrom(netip.AddrFrom4(res.RemoteAddr.Addr.As4()), res.RemoteAddr.Port)
			}
			c.rx.Store(netstackRxTime(res))
			c.rxGroup.Store(netstackRxGroup(res))
			c.rxIP.Store(0)
			return res.Count, nil
		case *tcpip.ErrWouldBlock:
			if c.s.closed.Load() {
				return 0, net.ErrClosed
			}
			if !spin.again() {
				c.waitReadable()
			}
		default:
			return 0, c.cause(err)
		}
	}
}

// waitReadable blocks until readCh signals: a datagram may be waiting (the
// ring's push or the netstack endpoint), the read deadline passed
// (deadline.wake), c closed (shut) or the Stack did (udpTable.close: a
// socket without a netstack endpoint hears of it only from the Stack).
func (c *UDPConn) waitReadable() { <-c.readCh }

// recvBufLocked returns the handler's buffer for datagrams read from the
// ring and the netstack endpoint, allocating it on first use (a socket
// whose datagrams all go straight to the handler never needs it).
//
// +checklocks:c.recv.mu
func (c *UDPConn) recvBufLocked() []byte {
	if c.recv.buf == nil {
		c.recv.buf = make([]byte, maxUDPPayload)
	}
	return c.recv.buf
}

// RxTime returns the time the link received the datagram the handler is
// handling (called from an OnReceive handler), or else the one the last
// read returned: the link's stamp (link.TimestampDispatcher: link/tap's
// read, link/pipe's send, a replay's capture time), or the time the frame
// reached the stack from a link that stamps nothing, on the real-time
// clock (time.Now's). A datagram netstack reassembled from fragments
// carries the time netstack delivered it. The Time has no monotonic
// reading; the zero Time before any datagram. It allocates nothing.
// With several goroutines reading c, a read's datagram and RxTime may not
// match: read from one goroutine, or use the handler.
func (c *UDPConn) RxTime() time.Time { return rxTime(c.rx.Load()) }

// rxIPv4Valid marks UDPConn.rxIP as known.
const rxIPv4Valid = 1 << 32

// RxIPv4ID returns the IPv4 identification and the flags and fragment
// offset word (0x4000: Don't Fragment) of the datagram the handler is
// handling or the last read returned, as RxTime does, for protocols whose
// integrity check covers the IP header (RoCEv2's invariant CRC). ok is
// false when they are not known: a datagram netstack delivered (IP
// options, a fragmented datagram's reassembled header, one larger than the
// link MTU - 28 while the handler was busy). It does not allocate.
func (c *UDPConn) RxIPv4ID() (id, flags uint16, ok bool) {
	v := c.rxIP.Load()
	return uint16(v >> 16), uint16(v), v&rxIPv4Valid != 0
}

// ReadFrom receives one datagram into b, which the caller owns; a datagram
// longer than b is truncated. It allocates the address it returns (once:
// the address and its IP share one allocation).
func (c *UDPConn) ReadFrom(b []byte) (int, net.Addr, error) {
	var from netip.AddrPort
	n, err := c.read(b, &from)
	if err != nil {
		return 0, nil, c.opError("read", nil, err)
	}
	box := &udpAddrBox{ip: from.Addr().As4()}
	box.addr = net.UDPAddr{IP: box.ip[:], Port: int(from.Port())}
	return n, &box.addr, nil
}

// udpAddrBox holds a *net.UDPAddr and the bytes of its IP.
type udpAddrBox struct {
	addr net.UDPAddr
	ip   [4]byte
}

// ReadFromUDPAddrPort is ReadFrom without allocating the address, as on
// *net.UDPConn.
func (c *UDPConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	var from netip.AddrPort
	n, err := c.read(b, &from)
	if err != nil {
		return 0, netip.AddrPort{}, c.opError("read", nil, err)
	}
	return n, from, nil
}

// Read receives one datagram on a connected socket into b, which the caller
// owns; a datagram longer than b is truncated.
func (c *UDPConn) Read(b []byte) (int, error) {
	n, err := c.read(b, nil)
	if err != nil {
		return 0, c.opError("read", nil, err)
	}
	return n, nil
}

// send sends b as one datagram to addr:port; a connected socket sends to its
// peer when connected is true.
func (c *UDPConn) send(b []byte, addr tcpip.Address, port uint16, connected bool) (int, error) {
	if err := c.check(c.wd.expired()); err != nil {
		return 0, err
	}
	if len(b) > maxUDPPayload {
		return 0, syscall.EMSGSIZE
	}
	if connected {
		if !c.connected {
			return 0, syscall.EDESTADDRREQ
		}
		addr, port = c.remote, c.remotePort
	}
	if e := c.route(addr); e != nil {
		err := c.sendDirect(e, b, port)
		e.release()
		if err != nil {
			return 0, c.cause(err)
		}
		return len(b), nil
	}
	var to *tcpip.FullAddress
	if !connected {
		to = &tcpip.FullAddress{NIC: nicID, Addr: addr, Port: port}
	}
	return c.sendNetstack(b, to)
}

// sendNetstack sends b through the netstack endpoint, to the connected peer
// when to is nil.
func (c *UDPConn) sendNetstack(b []byte, to *tcpip.FullAddress) (int, error) {
	e, err := c.endpoint()
	if err != nil {
		return 0, err
	}
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	opts := tcpip.WriteOptions{}
	if to != nil {
		e.to = *to
		opts.To = &e.to
	}
	e.wr.Reset(b)
	n, werr := e.ep.Write(&e.wr, opts)
	e.wr.Reset(nil)
	if werr != nil {
		if _, ok := werr.(*tcpip.ErrWouldBlock); ok {
			return 0, syscall.ENOBUFS
		}
		return 0, c.cause(werr)
	}
	return int(n), nil
}

// WriteToUDPAddrPort is WriteTo with a netip.AddrPort, as on *net.UDPConn.
// It does NOT take ownership of b: the bytes are copied before it returns.
func (c *UDPConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	ip := addr.Addr().Unmap()
	if !ip.Is4() {
		return 0, c.opError("write", net.UDPAddrFromAddrPort(addr), syscall.EAFNOSUPPORT)
	}
	n, err := c.send(b, tcpip.AddrFrom4(ip.As4()), addr.Port(), false)
	if err != nil {
		return n, c.opError("write", net.UDPAddrFromAddrPort(addr), err)
	}
	return n, nil
}

// WriteTo sends b as one datagram to addr, a *net.UDPAddr. It does NOT take
// ownership of b.
func (c *UDPConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, c.opError("write", addr, syscall.EINVAL)
	}
	ip := ua.IP.To4()
	if ip == nil {
		return 0, c.opError("write", addr, syscall.EAFNOSUPPORT)
	}
	n, err := c.send(b, tcpip.AddrFrom4Slice(ip), uint16(ua.Port), false)
	if err != nil {
		return n, c.opError("write", addr, err)
	}
	return n, nil
}

// Write sends b as one datagram on a connected socket. It does NOT take
// ownership of b.
func (c *UDPConn) Write(b []byte) (int, error) {
	n, err := c.send(b, tcpip.Address{}, 0, true)
	if err != nil {
		return n, c.opError("write", nil, err)
	}
	return n, nil
}

// Close closes the socket: blocked reads return net.ErrClosed, and its
// handler is not called again (a call in progress on another goroutine
// finishes). It may be called from the handler.
func (c *UDPConn) Close() error {
	if c.closed.Load() {
		return c.opError("close", nil, net.ErrClosed)
	}
	if !c.shut() {
		return c.opError("close", nil, net.ErrClosed)
	}
	// The netstack endpoint lets go of the port before the table does, so
	// that the next socket on the port can bind its own.
	c.closeEndpoint()
	c.t.remove(c.port, c)
	c.dropRoutes()
	return nil
}

// SetTOS sets the IPv4 type-of-service byte of the datagrams the socket
// sends from now on, as golang.org/x/net/ipv4's Conn.SetTOS does: the DSCP
// in its upper six bits (tos = dscp << 2). The two ECN bits are sent as
// zero, as TCPConn.SetTOS sends them. tos is 0 to 255 (else the error wraps
// syscall.EINVAL); the default is 0. It costs a send nothing.
func (c *UDPConn) SetTOS(tos int) error {
	if tos < 0 || tos > 255 {
		return c.opError("set", nil, syscall.EINVAL)
	}
	tos &^= 3
	// netstack's endpoint sends what direct delivery does not (broadcast).
	err := c.setOption(func() { c.tos.Store(uint32(tos)) }, func(ep tcpip.Endpoint) tcpip.Error {
		return ep.SetSockOptInt(tcpip.IPv4TOSOption, tos)
	})
	if err != nil {
		return c.opError("set", nil, err)
	}
	return nil
}

// LocalAddr returns the local address.
func (c *UDPConn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the connected peer, nil for a listening socket.
func (c *UDPConn) RemoteAddr() net.Addr {
	if c.raddr == nil {
		return nil
	}
	return c.raddr
}

// netstackRxTime returns the receive time of a datagram read from
// netstack's endpoint (one direct delivery left to it: fragments, IP
// options), which records it when it queues the datagram.
func netstackRxTime(res tcpip.ReadResult) int64 {
	if res.ControlMessages.HasTimestamp {
		return res.ControlMessages.Timestamp.UnixNano()
	}
	return rxclock.Now()
}

// netstackRxGroup returns the multicast group a datagram read from
// netstack's endpoint was sent to (RxGroup), 0 for unicast.
func netstackRxGroup(res tcpip.ReadResult) uint32 {
	if !res.ControlMessages.HasIPPacketInfo {
		return 0
	}
	return groupOf(res.ControlMessages.PacketInfo.DestinationAddr)
}
