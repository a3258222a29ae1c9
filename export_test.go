package tickwire

import (
	"net"
	"net/netip"
	"time"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// NeighborCount returns the number of dynamic entries in netstack's own
// neighbor table, for tests checking the ARP bound against the real table.
func NeighborCount(s *Stack) int {
	entries, err := s.st.Neighbors(nicID, ipv4.ProtocolNumber)
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range entries {
		if e.State.String() != "Static" {
			n++
		}
	}
	return n
}

// ConnOptions reports the netstack options in effect on a connection from
// DialTCP or Accept.
type ConnOptions struct {
	Delay         bool // Nagle on
	SendBuffer    int64
	ReceiveBuffer int64
	Congestion    string
	SndCwnd       uint32 // congestion window, in segments

	Keepalive                        bool
	KeepaliveIdle, KeepaliveInterval time.Duration
	KeepaliveCount                   int
	UserTimeout                      time.Duration
}

func ConnOptionsOf(c net.Conn) ConnOptions {
	ep := c.(*TCPConn).ep
	var o ConnOptions
	o.Delay = ep.SocketOptions().GetDelayOption()
	o.SendBuffer = ep.SocketOptions().GetSendBufferSize()
	o.ReceiveBuffer = ep.SocketOptions().GetReceiveBufferSize() / 2 // see netstackReceiveBuffer
	var cc tcpip.CongestionControlOption
	if err := ep.GetSockOpt(&cc); err == nil {
		o.Congestion = string(cc)
	}
	var info tcpip.TCPInfoOption
	if err := ep.GetSockOpt(&info); err == nil {
		o.SndCwnd = info.SndCwnd
	}
	o.Keepalive = ep.SocketOptions().GetKeepAlive()
	var idle tcpip.KeepaliveIdleOption
	if err := ep.GetSockOpt(&idle); err == nil {
		o.KeepaliveIdle = time.Duration(idle)
	}
	var interval tcpip.KeepaliveIntervalOption
	if err := ep.GetSockOpt(&interval); err == nil {
		o.KeepaliveInterval = time.Duration(interval)
	}
	o.KeepaliveCount, _ = ep.GetSockOptInt(tcpip.KeepaliveCountOption)
	var user tcpip.TCPUserTimeoutOption
	if err := ep.GetSockOpt(&user); err == nil {
		o.UserTimeout = time.Duration(user)
	}
	return o
}

// NeighborState returns the state of addr in netstack's neighbor table, ""
// when absent.
func NeighborState(s *Stack, addr netip.Addr) string {
	entries, _ := s.st.Neighbors(nicID, ipv4.ProtocolNumber)
	for _, e := range entries {
		if e.Addr == tcpip.AddrFrom4(addr.As4()) {
			return e.State.String()
		}
	}
	return ""
}

// HeldFlows returns the number of connections whose segments may skip
// netstack's network layer (tcpdirect.go).
func HeldFlows(s *Stack) int {
	s.wire.flows.mu.RLock()
	defer s.wire.flows.mu.RUnlock()
	return len(s.wire.flows.m)
}

// ClockFrozen reports whether s's netstack clock stamp is set (latency
// mode's clockStamp).
func ClockFrozen(s *Stack) bool { return s.sy != nil && s.sy.clock.ns.Load() != 0 }

// ClockFreezes returns how many times the stamp was set since the Stack
// was built.
func ClockFreezes(s *Stack) uint64 { return s.sy.clock.freezes.Load() }

// HoldListener takes ln's endpoint as a program's call would (LockUser), so
// that netstack queues its inbound segments and processes none until
// release: a listener whose processing cannot keep up, made deterministic.
//
// +checklocksignore: the lock is released by the function returned.
func HoldListener(ln *TCPListener) (release func()) {
	ep := ln.ep.(*tcp.Endpoint)
	ep.LockUser()
	return func() { ep.UnlockUser() } // +checklocksignore
}

// HoldConn is HoldListener for a connection.
//
// +checklocksignore: the lock is released by the function returned.
func HoldConn(c *TCPConn) (release func()) {
	ep := c.ep.(*tcp.Endpoint)
	ep.LockUser()
	return func() { ep.UnlockUser() } // +checklocksignore
}

// ConnQueued is ListenerQueued for a connection.
func ConnQueued(c *TCPConn) (used, limit int) {
	ep := c.ep.(*tcp.Endpoint)
	return netstackunsafe.QueuedBytes(ep), int(ep.SocketOptions().GetReceiveBufferSize())
}

// ListenerQueued returns the memory of the segments ln's endpoint holds,
// in netstack's accounting, and its bound.
func ListenerQueued(ln *TCPListener) (used, limit int) {
	ep := ln.ep.(*tcp.Endpoint)
	return netstackunsafe.QueuedBytes(ep), int(ep.SocketOptions().GetReceiveBufferSize())
}

// IPv4 reassembly's bounds (frag.go).
const (
	FragDatagrams = fragDatagrams
	FragMemory    = fragMemory
)

// FragHeld returns the datagrams in reassembly and the memory their
// fragments are charged.
func FragHeld(s *Stack) (datagrams, mem int) { return s.wire.frags.held() }

// NetstackIPv4Received returns the IPv4 packets netstack's network layer
// received.
func NetstackIPv4Received(s *Stack) uint64 { return s.st.Stats().IP.PacketsReceived.Value() }

// HoldUDPHandler takes c's handler lock, as a goroutine running c's handler
// holds it, until release is called.
//
// +checklocksignore: the lock is released by the function returned.
func HoldUDPHandler(c *UDPConn) (release func()) {
	c.recv.mu.Lock()
	return c.recv.mu.Unlock
}

// SetFloodGate sets the admission rate (segments a second) and burst of
// listener ln's floodGate, for tests whose sender is slower than the
// defaults on a loaded machine.
func SetFloodGate(ln *TCPListener, rate, burst int) {
	g := ln.s.wire.tcp.gate(ln.ep.(*tcp.Endpoint))
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cost = 1e9 / int64(rate)
	g.maxCredit = int64(burst) * g.cost
}

// HasNetstackEndpoint reports whether c has made its netstack endpoint
// (UDPConn.endpoint).
func HasNetstackEndpoint(c *UDPConn) bool { return c.nsep.Load() != nil }

// HandedOff returns the segments handed to c's waiting Read (handoff.go).
func HandedOff(c net.Conn) uint64 { return c.(*TCPConn).hand.given.Load() }

// WriteHandedOff returns the segments handed to c's Write waiting for
// send-buffer space (handoff.go).
func WriteHandedOff(c net.Conn) uint64 { return c.(*TCPConn).whand.given.Load() }

// ReadWaiting reports whether a Read on c waits in hand-off.
func ReadWaiting(c net.Conn) bool { return c.(*TCPConn).hand.waiting() }

// TCPDirect returns the segments that skipped netstack's network layer, in
// either mode (Stats.LatencyTCPDirect reports them in latency mode).
func TCPDirect(s *Stack) uint64 { return s.wire.counters.tcpDirect.Load() }

// HandsOut returns the segments s handed to a waiting Read, Write or
// handler that it has not processed yet.
func HandsOut(s *Stack) int32 { return s.wire.handsOut.Load() }

// InlineLink reports whether s makes stack room before a dial or a close
// (its link delivers inline: link.InlineDeliverer).
func InlineLink(s *Stack) bool { return s.inline }

// SetTxBacklogWait sets the longest hold of a Write on the link's backlog
// for the Stacks made from now on, and returns what restores it.
func SetTxBacklogWait(d time.Duration) (restore func()) {
	old := txBacklogWait
	txBacklogWait = d
	return func() { txBacklogWait = old }
}

// DeferredProcessed returns how many times s's wire processed, on the
// delivering goroutine, segments a goroutine waits for (a handshake's, a
// peer's FIN), and how many it left to a processor because s was sending.
func DeferredProcessed(s *Stack) (processed, kicked uint64) {
	return s.wire.counters.tcpDeferred.Load(), s.wire.counters.tcpDeferredKicked.Load()
}
