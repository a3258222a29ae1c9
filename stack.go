package tickwire

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
	"github.com/tickwire/tickwire/link"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// nicID is the one interface of every Stack.
const nicID tcpip.NICID = 1

// Stack is a trimmed netstack on one link with one IPv4 address. All methods
// are safe for concurrent use.
type Stack struct {
	cfg  Config
	st   *gstack.Stack
	wire *wire
	// tcp is netstack's TCP with tickwire's queue bound and latency mode
	// (tcpproto.go); nil when netstack's internals were not found.
	tcp   *tcpProtocol
	arp   *arpTable
	conns connBudget
	// sources counts accepted connections per remote address against
	// MaxConnectionsPerSource.
	sources sourceBudget
	// idle closes connections idle for Config.IdleTimeout; nil when it is
	// off.
	idle *idleSweeper
	// log is Config.Logger behind its rate limit; nil without a Logger.
	log *eventLog
	// gate holds TCPConn.Writes while Config.Link's transmit backlog is
	// long (backlog.go); nil when the link reports none.
	gate *backlogGate
	// inline is set when Config.Link delivers inline
	// (link.InlineDeliverer): a dial or a close then makes room on the
	// caller's stack first (makeStackRoom).
	inline bool
	// keepalive is Config's keepalive, set on every new connection.
	keepalive *keepAliveOpts
	// handlerBufs holds *[]byte of Config.ReceiveBuffer bytes that
	// handler runs borrow (TCPConn.drainLocked).
	handlerBufs sync.Pool

	// sy runs latency mode's synchronous TCP processing; nil when latency
	// mode is off (or netstack's internals were not found).
	sy *syncer
	// goroutines counts tickwire's own goroutines besides the ARP evictor
	// (OnReceive loops, ServeTCP accept loops); done tells them to stop.
	goroutines sync.WaitGroup
	done       chan struct{}

	// open holds the listeners and connections the program holds, for
	// Shutdown; stopping is set when Shutdown begins.
	open     openSet
	stopping atomic.Bool

	closeOnce sync.Once
	closed    atomic.Bool
}

// connBudget counts established connections against MaxConnections.
type connBudget struct {
	max                               int64
	open                              atomic.Int64
	accepted, dialed, refused, failed atomic.Uint64
}

// acquire takes a slot, reporting false (and counting a refusal) when none
// is left.
func (b *connBudget) acquire() bool {
	for {
		n := b.open.Load()
		if n >= b.max {
			b.refused.Add(1)
			return false
		}
		if b.open.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (b *connBudget) release() { b.open.Add(-1) }

// sourceBudget counts accepted connections per remote IPv4 address against
// MaxConnectionsPerSource. Its map holds an entry per address with an open
// accepted connection, so at most MaxConnections entries.
type sourceBudget struct {
	max     int
	refused atomic.Uint64

	mu sync.Mutex
	// +checklocks:mu
	open map[tcpip.Address]int
}

// acquire takes a slot for src, reporting false (and counting a refusal)
// when src holds max already.
func (b *sourceBudget) acquire(src tcpip.Address) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[src] >= b.max {
		b.refused.Add(1)
		return false
	}
	if b.open == nil {
		b.open = make(map[tcpip.Address]int)
	}
	b.open[src]++
	return true
}

func (b *sourceBudget) release(src tcpip.Address) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.open[src]; n > 1 {
		b.open[src] = n - 1
	} else {
		delete(b.open, src)
	}
}

// New builds a Stack on cfg.Link, applying defaults to zero fields. An
// invalid field yields a *ConfigError naming it. The Stack owns cfg.Link from
// then on; Close closes it.
func New(cfg Config) (*Stack, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg, arp: newARPTable(cfg.ARPEntries), done: make(chan struct{})}
	s.conns.max = int64(cfg.MaxConnections)
	s.gate = newBacklogGate(cfg.Link)
	if il, ok := cfg.Link.(link.InlineDeliverer); ok {
		s.inline = il.DeliversInline()
	}
	s.keepalive = cfg.configKeepAlive().opts()
	s.sources.max = cfg.MaxConnectionsPerSource
	if cfg.Latency && netstackunsafe.Available() {
		s.sy = newSyncer()
	}
	s.st = gstack.New(gstack.Options{
		NetworkProtocols:   []gstack.NetworkProtocolFactory{ipv4.NewProtocolWithOptions(ipv4.Options{IGMP: ipv4.IGMPOptions{Enabled: true}}), arp.NewProtocol},
		TransportProtocols: []gstack.TransportProtocolFactory{tcpFactory(s.sy, &s.tcp), udp.NewProtocol, icmp.NewProtocol4},
		NUDDisp:            s.arp,
		Clock:              newClock(s.sy.stamp()),
	})
	if err := s.configure(); err != nil {
		s.st.Destroy()
		return nil, err
	}
	if bp, ok := cfg.Link.(link.BusyPoller); ok && cfg.BusyPoll > 0 {
		bp.SetBusyPoll(cfg.BusyPoll) // link/tap polls the device before it parks
	}
	if tl, ok := cfg.Link.(link.ThreadLocker); ok && cfg.LockOSThread {
		tl.SetLockOSThread(true)
	}
	s.log = acquireEventLog(cfg.Logger)
	s.arp.start(func(addr tcpip.Address) {
		_ = s.st.RemoveNeighbor(nicID, ipv4.ProtocolNumber, addr) // gone already is fine
	})
	if cfg.IdleTimeout > 0 {
		s.idle = newIdleSweeper(cfg.IdleTimeout)
		s.goroutines.Add(1)
		go func() {
			defer s.goroutines.Done()
			s.idle.run(s.done)
		}()
	}
	s.watchEvents() // Config.Logger's summaries (events.go)
	return s, nil
}

// netstackReceiveBuffer is the receive buffer netstack is given for a
// receive window of rcvWnd bytes (Config.ReceiveBuffer, SetReadBuffer).
// netstack advertises half its buffer (the other half pays for the
// segments' bookkeeping, as Linux's tcp_adv_win_scale 1 did), so it gets
// twice the window. The memory a connection holds for received data is
// therefore bounded by twice Config.ReceiveBuffer, in netstack's accounting,
// and reaches that only while the program does not read; an idle
// connection holds none.
func netstackReceiveBuffer(rcvWnd int) int { return 2 * rcvWnd }

func (s *Stack) configure() error {
	cfg := &s.cfg
	fail := func(what string, err tcpip.Error) error {
		return opError(what, "ip4", nil, nil, convertError(err))
	}
	for _, opt := range []tcpip.SettableTransportProtocolOption{
		ptr(tcpip.TCPSACKEnabled(cfg.SACK)),
		ptr(tcpip.CongestionControlOption(cfg.Congestion)),
		ptr(tcpip.TCPDelayEnabled(cfg.DisableNoDelay)),
		// Auto-tuning (Config.ReceiveBufferMax) grows a connection's buffer
		// up to the range's Max, only when the connection's reads call
		// ModerateRecvBuf (TCPConn.moderate).
		ptr(tcpip.TCPModerateReceiveBufferOption(cfg.ReceiveBufferMax > cfg.ReceiveBuffer)),
		// Send-buffer auto-tuning (Config.SendBufferMax) is netstack's own:
		// it grows a buffer with the congestion window up to the Max.
		&tcpip.TCPSendBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: cfg.SendBuffer, Max: cfg.SendBufferMax},
		&tcpip.TCPReceiveBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: netstackReceiveBuffer(cfg.ReceiveBuffer), Max: netstackReceiveBuffer(cfg.ReceiveBufferMax)},
	} {
		if err := s.st.SetTransportProtocolOption(tcp.ProtocolNumber, opt); err != nil {
			return fail("set tcp option", err)
		}
	}

	addr := tcpip.AddrFrom4(cfg.Addr.Addr().As4())
	s.wire = newWire(cfg.Link, cfg.MTU, cfg.MSS, addr, s.arp, s.sy)
	s.wire.subnet = tcpip.AddressWithPrefix{Address: addr, PrefixLen: cfg.Addr.Bits()}.Subnet()
	s.wire.routed = cfg.Gateway.IsValid()
	s.wire.udp = newUDPTable(s)
	s.wire.tcp = s.tcp
	// In stock mode over link/pipe, the segments a goroutine waits for in
	// a connection's setup and teardown are processed by the delivering
	// goroutine (tcpProtocol.deferProcessing).
	if s.inline && s.sy == nil && s.tcp != nil {
		s.wire.inline, s.tcp.inline = true, true
	}
	// With the tcp internals found, TIME-WAIT is a record in the wire's
	// table (timewait.go) and netstack closes the endpoint as it enters
	// the state; without them netstack keeps it, for Config.TimeWait.
	netstackTimeWait := cfg.TimeWait
	if s.tcp != nil {
		s.wire.tw = newTimeWaitTable(s.st, cfg.TimeWait, cfg.MaxTimeWait)
		netstackTimeWait = 0
	}
	if err := s.st.SetTransportProtocolOption(tcp.ProtocolNumber, ptr(tcpip.TCPTimeWaitTimeoutOption(netstackTimeWait))); err != nil {
		return fail("set tcp option", err)
	}
	s.wire.frags = newFragTable(s.st.Clock(), addr, s.wire.subnet.Broadcast())
	cfg.Link.SetLinkAddress(tcpip.LinkAddress(cfg.MAC))
	if err := s.st.CreateNICWithOptions(nicID, s.wire, gstack.NICOptions{Name: "tw0", QDisc: &passThrough{w: s.wire}}); err != nil {
		return fail("create nic", err)
	}
	nud := gstack.DefaultNUDConfigurations()
	nud.MaxMulticastProbes = 3
	nud.RetransmitTimer = cfg.ARPTimeout / 3
	if err := s.st.SetNUDConfigurations(nicID, ipv4.ProtocolNumber, nud); err != nil {
		return fail("set arp timeout", err)
	}
	prefix := tcpip.AddressWithPrefix{Address: addr, PrefixLen: cfg.Addr.Bits()}
	if err := s.st.AddProtocolAddress(nicID, tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: prefix}, gstack.AddressProperties{}); err != nil {
		return fail("add address", err)
	}
	routes := []tcpip.Route{{Destination: prefix.Subnet(), NIC: nicID}}
	if cfg.Gateway.IsValid() {
		routes = append(routes, tcpip.Route{Destination: header.IPv4EmptySubnet, Gateway: tcpip.AddrFrom4(cfg.Gateway.As4()), NIC: nicID})
	}
	s.st.SetRouteTable(routes)
	for ip, mac := range cfg.StaticARP {
		if err := s.st.AddStaticNeighbor(nicID, ipv4.ProtocolNumber, tcpip.AddrFrom4(ip.As4()), tcpip.LinkAddress(mac)); err != nil {
			return fail("add static arp", err)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// Config returns the configuration in use, defaults applied.
func (s *Stack) Config() Config { return s.cfg }

// Addr returns the stack's IPv4 address.
func (s *Stack) Addr() netip.Addr { return s.cfg.Addr.Addr() }

// Close stops the stack: it resets every connection, closes every listener
// and socket, stops netstack's goroutines and tickwire's ARP evictor, and
// closes the link. Blocked calls on the stack's connections return errors.
// Close is idempotent; it returns nil.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.done)
		s.st.Close()
		s.wire.udp.close()
		s.st.Wait()
		s.wire.frags.close()
		if s.wire.tw != nil {
			s.wire.tw.close()
		}
		s.goroutines.Wait()
		s.wire.out.close()
		s.wire.owed.close()
		s.gate.close()
		s.arp.stop()
		s.log.release()
	})
	return nil
}

// Shutdown closes the stack gracefully: it stops accepting (every
// listener is closed and the connections in their accept queues are reset;
// ListenTCP and DialTCP fail with net.ErrClosed from now on), shuts down
// the sending side of every open TCP connection, as CloseWrite does (the
// peer receives all the bytes written before Shutdown, then EOF; Writes
// fail from now on, Reads and handlers go on), and waits until the peer of
// every connection, open or closed by the program, has acknowledged
// everything, FIN included, or until ctx ends; then it closes the stack as
// Close does, resetting what has not drained. It returns nil when every
// connection drained, ctx's error otherwise. A peer that keeps its own
// side open receives a RST at the end, after its EOF. Like Close, Shutdown
// is idempotent; after Close it returns nil at once.
func (s *Stack) Shutdown(ctx context.Context) error {
	if s.closed.Load() {
		return nil
	}
	s.stopping.Store(true)
	ls, cs := s.open.beginDrain()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range cs {
		c.CloseWrite() // fails only on a connection already closed or reset: nothing to drain
	}
	err := waitDrained(ctx, s.open.drained)
	s.Close()
	return err
}

// tcpEndpoint creates a TCP endpoint with tickwire's per-connection options.
func (s *Stack) tcpEndpoint(wq *waiter.Queue) (tcpip.Endpoint, tcpip.Error) {
	ep, err := s.st.NewEndpoint(tcp.ProtocolNumber, ipv4.ProtocolNumber, wq)
	if err != nil {
		return nil, err
	}
	if err := ep.SetSockOptInt(tcpip.MaxSegOption, s.cfg.MSS); err != nil {
		ep.Close()
		return nil, err
	}
	ep.SocketOptions().SetDelayOption(s.cfg.DisableNoDelay)
	return ep, nil
}

// setKeepalive applies Config's keepalive and user timeout to an
// established connection's endpoint (netstack's accepted endpoints do not
// inherit them from the listener). A peer that reset the connection
// meanwhile is no error: the endpoint is closed, and the options have
// nothing left to do.
func (s *Stack) setKeepalive(ep tcpip.Endpoint) {
	_ = s.keepalive.set(ep)
}

// ListenTCP listens on port of the stack's address (0 picks a free port).
// Accepted connections count against Config.MaxConnections until closed.
func (s *Stack) ListenTCP(port uint16) (*TCPListener, error) {
	laddr := &net.TCPAddr{IP: s.cfg.Addr.Addr().AsSlice(), Port: int(port)}
	if s.closed.Load() || s.stopping.Load() {
		return nil, opError("listen", "tcp", nil, laddr, net.ErrClosed)
	}
	wq := new(waiter.Queue)
	ep, err := s.tcpEndpoint(wq)
	if err != nil {
		return nil, opError("listen", "tcp", nil, laddr, convertError(err))
	}
	if err := ep.Bind(tcpip.FullAddress{NIC: nicID, Port: port}); err != nil {
		ep.Close()
		return nil, opError("listen", "tcp", nil, laddr, convertError(err))
	}
	if err := ep.Listen(listenBacklog(s.cfg.MaxConnections)); err != nil {
		ep.Close()
		return nil, opError("listen", "tcp", nil, laddr, convertError(err))
	}
	// A listener's receive buffer bounds its queue of inbound segments
	// (see tcpProtocol.admit); accepted connections take the receive
	// buffer it had when Listen was called, Config.ReceiveBuffer.
	ep.SocketOptions().SetReceiveBufferSize(listenQueueBytes, true)
	if a, err := ep.GetLocalAddress(); err == nil {
		laddr.Port = int(a.Port)
	}
	if tep, ok := ep.(*tcp.Endpoint); ok && s.tcp != nil {
		s.tcp.addListener(uint16(laddr.Port), tep)
	}
	l := &TCPListener{s: s, ep: ep, wq: wq, addr: laddr, dl: newDeadline(), done: make(chan struct{})}
	if !s.open.addListener(l) {
		l.Close()
		return nil, opError("listen", "tcp", nil, laddr, net.ErrClosed)
	}
	return l, nil
}

// listenBacklog sizes netstack's accept queue. Its SYN queue holds as many
// half-open connections; beyond that netstack answers with SYN cookies, so
// a SYN flood never exhausts it.
func listenBacklog(maxConns int) int {
	return min(max(maxConns, 16), 1024)
}

// DialTCP connects to addr. It fails with a *net.OpError whose cause is
// ErrTooManyConnections when Config.MaxConnections connections are open,
// wraps syscall.EHOSTUNREACH when ARP gets no answer within
// Config.ARPTimeout, ENETUNREACH when addr is off-link and there is no
// Gateway, ECONNREFUSED on a reset, ETIMEDOUT when SYNs go unanswered, and
// returns ctx's error when ctx ends first.
func (s *Stack) DialTCP(ctx context.Context, addr netip.AddrPort) (*TCPConn, error) {
	return s.dialTCP(ctx, 0, addr)
}

// dialTCP is DialTCP from local port lport (0: a free one).
// dialError is a failed dial's error. It makes the peer's net.TCPAddr
// only then: a dial that succeeds has no use for it (two allocations).
func dialError(addr netip.AddrPort, laddr net.Addr, err error) error {
	return opError("dial", "tcp", laddr, net.TCPAddrFromAddrPort(addr), err)
}

func (s *Stack) dialTCP(ctx context.Context, lport uint16, addr netip.AddrPort) (*TCPConn, error) {
	if s.closed.Load() || s.stopping.Load() {
		return nil, dialError(addr, nil, net.ErrClosed)
	}
	if !addr.Addr().Is4() {
		return nil, dialError(addr, nil, syscall.EAFNOSUPPORT)
	}
	if !s.conns.acquire() {
		return nil, dialError(addr, nil, ErrTooManyConnections)
	}
	c, err := s.dial(ctx, lport, addr)
	if err != nil {
		s.conns.release()
		s.conns.failed.Add(1)
		return nil, err
	}
	s.conns.dialed.Add(1)
	return c, nil
}

func (s *Stack) dial(ctx context.Context, lport uint16, addr netip.AddrPort) (*TCPConn, error) {
	wq := new(waiter.Queue)
	ep, terr := s.tcpEndpoint(wq)
	if terr != nil {
		return nil, dialError(addr, nil, convertError(terr))
	}
	if lport != 0 {
		if terr := ep.Bind(tcpip.FullAddress{NIC: nicID, Port: lport}); terr != nil {
			ep.Close()
			laddr := &net.TCPAddr{IP: s.cfg.Addr.Addr().AsSlice(), Port: int(lport)}
			return nil, dialError(addr, laddr, convertError(terr))
		}
	}
	we := registerChanEntry(wq, waiter.WritableEvents)
	defer we.unregister(wq)

	if s.inline {
		makeStackRoom()
	}
	// Over link/pipe the SYN leaves once Connect has let go of the
	// endpoint, so that the handshake completes on this goroutine
	// (frameHold).
	hk := holdKey{raddr: addr.Addr().As4(), rport: addr.Port(), lport: lport}
	if s.wire.inline {
		s.wire.hold.hold(hk)
	}
	terr = ep.Connect(tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(addr.Addr().As4()), Port: addr.Port()})
	if s.wire.inline {
		s.wire.hold.release(s.wire, hk)
	}
	if _, ok := terr.(*tcpip.ErrConnectStarted); ok {
		select {
		case <-ctx.Done():
			ep.Close()
			return nil, dialError(addr, nil, ctx.Err())
		case <-we.ch:
		}
		terr = ep.LastError()
	}
	if terr != nil {
		ep.Close()
		if s.closed.Load() {
			return nil, dialError(addr, nil, net.ErrClosed)
		}
		return nil, dialError(addr, nil, convertError(terr))
	}
	return s.newTCPConn(wq, ep), nil
}

// ListenUDP opens a UDP socket on port of the stack's address (0 picks a
// free port). Any port from 1 to 65535 can be used.
func (s *Stack) ListenUDP(port uint16) (*UDPConn, error) {
	laddr := &net.UDPAddr{IP: s.cfg.Addr.Addr().AsSlice(), Port: int(port)}
	c, err := s.udpEndpoint(tcpip.FullAddress{NIC: nicID, Port: port}, nil)
	if err != nil {
		return nil, opError("listen", "udp", nil, laddr, err)
	}
	return c, nil
}

// DialUDP opens a UDP socket connected to addr, from a free local port.
func (s *Stack) DialUDP(addr netip.AddrPort) (*UDPConn, error) {
	return s.dialUDP(0, addr)
}

// dialUDP is DialUDP from local port lport (0: a free one).
func (s *Stack) dialUDP(lport uint16, addr netip.AddrPort) (*UDPConn, error) {
	raddr := net.UDPAddrFromAddrPort(addr)
	if !addr.Addr().Is4() {
		return nil, opError("dial", "udp", nil, raddr, syscall.EAFNOSUPPORT)
	}
	c, err := s.udpEndpoint(tcpip.FullAddress{NIC: nicID, Port: lport}, &tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(addr.Addr().As4()), Port: addr.Port()})
	if err != nil {
		return nil, opError("dial", "udp", nil, raddr, err)
	}
	return c, nil
}
