package tickwire

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/tickwire/tickwire/internal/netstackunsafe"
)

// TCPConn is a TCP connection from DialTCP, Accept or ServeTCP: a thin
// wrapper over a netstack TCP endpoint and its waiter queue. It implements
// net.Conn; OnReceive switches it to the handler API. It holds one
// MaxConnections slot (and, when accepted, a MaxConnectionsPerSource slot
// of its peer's address) until Close.
//
// All methods are safe for concurrent use; concurrent Reads (and concurrent
// Writes) are serialised. Read and Write allocate nothing in steady state.
// Opening and closing a connection (dial, accept, both closes) allocates
// at most 165 heap objects, both ends together: netstack's endpoint (its
// sender, receiver, timers and handshake) makes most of them.
//
// Lock order (the handler path: OnReceive installs the handler under
// readMu; a handler run holds the receiver's lock while the user's
// TCPHandler runs, and the handler's Write takes writeMu; netstack's
// endpoint lock and the stack's leaf locks, the outbox's and the syncer's,
// are taken inside netstack's Read and Write):
//
//	TCPConn.readMu
//	  receiver.mu
//	    the user's TCPHandler
//	      TCPConn.writeMu
//	        netstack's tcp.Endpoint lock
//	          outbox.mu, syncer.mu
//
// Close and the idle sweeper's reset take endMu around netstack's
// endpoint lock, so that the reset never reaches a closed endpoint:
//
//	TCPConn.endMu
//	  netstack's tcp.Endpoint lock
type TCPConn struct {
	sock
	s     *Stack
	laddr *net.TCPAddr // &addrs[0] when netstack knew the address
	raddr *net.TCPAddr // &addrs[1]
	// addrs and ips hold what laddr and raddr point to, inside the
	// TCPConn's own allocation (four fewer per connection).
	addrs [2]net.TCPAddr
	ips   [2][4]byte

	// tep is the netstack endpoint and sy the stack's syncer, both nil
	// unless latency mode processes TCP synchronously.
	tep *tcp.Endpoint
	sy  *syncer
	// rx is the receive time of the newest segment with payload netstack
	// was given for the connection (RxTime); rxEP its endpoint in the
	// stack's rxConns, nil when the stack keeps none.
	rx   atomic.Int64
	rxEP *tcp.Endpoint

	readMu sync.Mutex
	// +checklocks:readMu
	rw tcpip.SliceWriter

	writeMu sync.Mutex
	// +checklocks:writeMu
	wr bytes.Reader

	recv receiver // OnReceive's state
	// inline tells the handler's listener whether the syncer is processing
	// this connection right now (see syncer.process); inScope is true while
	// the syncer runs its handler inside its own hold of the outbox.
	inline  atomic.Int32
	inScope atomic.Bool

	// src is the peer's address when the connection was accepted (sourced):
	// it holds one of src's MaxConnectionsPerSource slots.
	src     tcpip.Address
	sourced bool
	// activity counts the Reads, Writes and handler calls that moved data,
	// while idleWatched (Config.IdleTimeout set; immutable) says the idle
	// sweeper reads it. idleClosed is set by the sweeper's reset.
	activity    atomic.Uint64
	idleWatched bool
	idleClosed  atomic.Bool
	endMu       sync.Mutex

	bytesRx, bytesTx atomic.Uint64 // payload bytes read and written (Info)
	// linger is the wait SetLinger asked Close for, in nanoseconds (0:
	// none).
	linger atomic.Int64

	// twEntry is the timeWaitListener, registered while the stack keeps
	// TIME-WAIT records; timeWaitSeen is set when it recorded (or tried to
	// record) the connection.
	twEntry      waiter.Entry
	timeWaitSeen atomic.Bool
	// unmoderated counts bytes read not yet passed on to receive-buffer
	// auto-tuning (moderate): at most a segment plus one read's worth,
	// which the window bounds. 32 bits, in what was padding: a TCPConn
	// is 760 bytes, 768 (a size class) with the 8-byte header the runtime
	// gives an object with pointers over 512 bytes; 8 more bytes took it
	// to the next class, 896, and tcp_10k_conns_mem from 30.0 to 30.3
	// KiB per connection.
	unmoderated atomic.Uint32

	// handEP is the netstack endpoint when Reads wait in hand-off (stock
	// mode, handoff.go), else nil; hand is the reader's hand-off state.
	handEP *tcp.Endpoint
	hand   handoff
	whand  handoff // the writer's, waiting for send-buffer space
	// ackDue says the reader's hand-off processing left an ACK for the
	// Read (or the stock-mode handler's drain) to settle
	// (afterHandoffRead); under readMu, or on the handler's receive loop.
	ackDue bool
	// latReads counts the starts and ends of Reads in latency mode (odd
	// while one runs), and latACK is set when the syncer's processing left
	// the ACK for the Read that ran then to send (syncer.process): after
	// the read, one ACK carries it and the window the read opened. The
	// count, not a flag, tells the processing whether that same Read still
	// runs: a later one may wait for data that only the ACK brings.
	latReads atomic.Uint32
	latACK   atomic.Bool
	// flow is the flow of the connection's inbound segments, registered in
	// the wire's flows when flowKnown (stock mode, handoff.go).
	flow      flowKey
	flowKnown bool
	// cwndKept is when Write last marked the sender active (keepCwnd);
	// under writeMu.
	cwndKept tcpip.MonotonicTime
}

var _ net.Conn = (*TCPConn)(nil)

func (s *Stack) newTCPConn(wq *waiter.Queue, ep tcpip.Endpoint) *TCPConn {
	s.setKeepalive(ep)
	c := &TCPConn{s: s, idleWatched: s.idle != nil}
	c.init(wq, ep, &s.cfg)
	if s.wire.tw != nil {
		c.twEntry.Init(timeWaitListener{c}, waiter.EventHUp)
		wq.EventRegister(&c.twEntry)
	}
	if s.sy != nil {
		c.tep, _ = ep.(*tcp.Endpoint)
		if c.tep != nil {
			c.sy = s.sy
			s.wire.flows.add(c.tep)
		}
	}
	local, lerr := ep.GetLocalAddress()
	if lerr == nil {
		c.laddr = c.setAddr(0, local)
	}
	remote, rerr := ep.GetRemoteAddress()
	if rerr == nil {
		c.raddr = c.setAddr(1, remote)
	}
	if tep, ok := ep.(*tcp.Endpoint); ok && s.tcp != nil {
		c.rxEP = tep
		if s.sy == nil {
			c.handEP = tep
			if lerr == nil && rerr == nil {
				c.flow, c.flowKnown = inboundFlowOf(local, remote)
				if c.flowKnown {
					s.wire.flows.addKey(c.flow, tep)
				}
			}
		}
		s.tcp.conns.add(tep, c)
	}
	if c.idleWatched {
		s.idle.add(c)
	}
	if s.open.addConn(c) {
		c.CloseWrite() // Shutdown began while the connection was made
	}
	return c
}

// setAddr fills c.addrs[i] with a and returns it.
func (c *TCPConn) setAddr(i int, a tcpip.FullAddress) *net.TCPAddr {
	if a.Addr.Len() != 4 { // the stack is IPv4 only; never seen
		return &net.TCPAddr{IP: a.Addr.AsSlice(), Port: int(a.Port)}
	}
	c.ips[i] = a.Addr.As4()
	c.addrs[i] = net.TCPAddr{IP: c.ips[i][:], Port: int(a.Port)}
	return &c.addrs[i]
}

// moved notes a call that moved data, for the idle sweeper.
func (c *TCPConn) moved() {
	if c.idleWatched {
		c.activity.Add(1)
	}
}

// closeIdle resets the connection for Config.IdleTimeout, and counts it in
// count, unless the program closed it first.
func (c *TCPConn) closeIdle(count *atomic.Uint64) {
	c.endMu.Lock()
	defer c.endMu.Unlock()
	if c.closed.Load() {
		return
	}
	c.idleClosed.Store(true)
	count.Add(1) // before the reset, which the program and the peer see
	c.ep.Abort() // sends a RST; Reads, Writes and the handler see ErrIdleTimeout
}

// cause converts a netstack error as sock.cause does, reporting
// ErrIdleTimeout after the idle sweeper's reset.
func (c *TCPConn) cause(err tcpip.Error) error {
	if c.idleClosed.Load() && !c.closed.Load() {
		return ErrIdleTimeout
	}
	return c.sock.cause(err)
}

func (c *TCPConn) opError(op string, err error) error {
	return opError(op, "tcp", c.laddr, c.raddr, err)
}

// hold and release bracket a netstack call on the endpoint in latency
// mode: frames it writes wait until it returns (see outbox), then release
// processes what arrived while the call held the endpoint. A call from the
// connection's handler, which the syncer runs inside its own hold, takes
// none: the syncer flushes and processes when the handler returns. hold
// reports whether it held; release is given that answer.
func (c *TCPConn) hold() bool {
	if c.sy == nil || c.inScope.Load() {
		return false
	}
	c.s.wire.out.hold()
	return true
}

func (c *TCPConn) release(held bool) {
	if !held {
		return
	}
	c.s.wire.out.release()
	c.sy.afterUser(c.tep)
}

// Read reads up to len(b) bytes into b, which the caller owns. It returns
// io.EOF after the peer's FIN, an error wrapping os.ErrDeadlineExceeded
// after the read deadline, one wrapping net.ErrClosed after Close, and one
// wrapping ErrHandlerSet once OnReceive was called. In latency mode it
// busy-polls for up to Config.BusyPoll before it sleeps.
func (c *TCPConn) Read(b []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.recv.set.Load() {
		return 0, c.opError("read", ErrHandlerSet)
	}
	if c.sy != nil {
		c.latReads.Add(1) // odd: reading
		defer c.sy.readDone(c)
	}
	expired := c.rd.expired()
	spin := spinner{budget: c.busyPoll}
	for {
		if err := c.check(expired); err != nil {
			c.afterHandoffRead(false) // settles an ACK the last wait left
			return 0, c.opError("read", err)
		}
		if len(b) == 0 {
			return 0, nil
		}
		c.rw = b
		held := c.hold()
		res, err := c.ep.Read(&c.rw, tcpip.ReadOptions{})
		c.release(held)
		c.rw = nil
		if err == nil {
			c.moderate(res.Count) // first, so that the window update below announces any growth
		}
		c.afterHandoffRead(err == nil)
		switch err.(type) {
		case nil:
			c.sy.afterRead(c.tep)
			c.received(res.Count)
			return res.Count, nil
		case *tcpip.ErrWouldBlock:
			if !spin.again() {
				c.waitRead(nil)
			}
		case *tcpip.ErrClosedForReceive:
			return 0, io.EOF
		default:
			return 0, c.opError("read", c.cause(err))
		}
	}
}

// Write writes all of b unless an error occurs: a reset (ECONNRESET), the
// write deadline (os.ErrDeadlineExceeded), or Close (net.ErrClosed). It
// blocks while the send buffer (Config.SendBuffer) is full; in latency mode
// it busy-polls for up to Config.BusyPoll first. Over a link that reports
// its transmit backlog (link.TxBacklogger), it also waits while more than
// half the link's queue (at most 1024 frames) waits in it, until the link
// has sent half of that or for 20 ms at most (Stats.TCPWritesHeld).
// It does NOT take ownership of b: the bytes are copied into the send
// buffer before it returns. Called while the connection's OnReceive
// handler runs, it waits for neither (see ErrSendBufferFull).
func (c *TCPConn) Write(b []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	expired := c.wd.expired()
	spin := spinner{budget: c.busyPoll}
	n := 0
	for {
		if err := c.check(expired); err != nil {
			return n, c.opError("write", err)
		}
		if n == len(b) {
			return n, nil
		}
		if c.s.gate != nil && !c.recv.running.Load() && !c.s.gate.wait(c.writeCh, expired, c.done) {
			continue // the deadline or Close ended the hold: check reports which
		}
		c.wr.Reset(b[n:])
		held := c.hold()
		frozen := c.sy.stamp().freeze() // one clock reading for the segments this builds
		c.keepCwnd()                    // after freeze: in latency mode it reads the stamp
		m, err := c.ep.Write(&c.wr, tcpip.WriteOptions{})
		c.sy.stamp().thaw(frozen)
		c.release(held)
		c.wr.Reset(nil)
		n += int(m)
		c.sent(int(m))
		switch err.(type) {
		case nil:
		case *tcpip.ErrWouldBlock:
			if c.recv.running.Load() {
				return n, c.opError("write", ErrSendBufferFull)
			}
			if !spin.again() {
				c.waitWrite()
			}
		default:
			return n, c.opError("write", c.cause(err))
		}
	}
}

// keepCwndEvery is how often a Write marks its sender active: below
// netstack's minimum retransmission timeout (200 ms), which the idle
// restart compares with.
const keepCwndEvery = 100 * time.Millisecond

// keepCwnd keeps the congestion window of a connection written now and
// then from going back to the initial window (Config.SlowStartAfterIdle):
// at most every keepCwndEvery, it marks netstack's sender as having just
// sent (netstackunsafe.KeepCwnd), the only thing the idle restart reads.
// Called by Write, under writeMu.
func (c *TCPConn) keepCwnd() {
	if c.rxEP == nil || c.s.cfg.SlowStartAfterIdle {
		return
	}
	now := c.s.st.Clock().NowMonotonic()
	if now.Sub(c.cwndKept) < keepCwndEvery {
		return
	}
	if netstackunsafe.KeepCwnd(c.rxEP, now) {
		c.cwndKept = now
	}
}

// Close closes the connection (with a RST when unread data remains, as
// Linux does) and frees its MaxConnections slot; SetLinger changes what
// happens to data not yet acknowledged. Blocked Reads and Writes
// return net.ErrClosed; an OnReceive handler is not called again. It may be
// called from the handler. A second Close returns an error wrapping
// net.ErrClosed.
func (c *TCPConn) Close() error {
	c.lingerClose()
	if c.sy != nil {
		c.s.wire.flows.remove(c.tep)
	}
	if c.flowKnown {
		c.s.wire.flows.removeKey(c.flow, c.handEP)
	}
	if c.rxEP != nil {
		c.s.tcp.conns.remove(c.rxEP)
	}
	if c.s.inline {
		makeStackRoom() // the FIN's delivery runs the peer's inbound path here
	}
	c.endMu.Lock()
	shut := c.shut()
	c.endMu.Unlock()
	if !shut {
		return c.opError("close", net.ErrClosed)
	}
	c.stopReceiving()
	c.s.open.closeConn(c)
	if c.idleWatched {
		c.s.idle.remove(c)
	}
	if c.sourced {
		c.s.sources.release(c.src)
	}
	c.s.conns.release()
	return nil
}

// RxTime returns the time the link received the newest segment with
// payload that the connection was given: in an OnReceive handler, the
// segment whose bytes the call hands over, or the newest of them; after a
// Read, the newest segment that had arrived when it returned, which is the
// one its bytes came from unless more arrived meanwhile. The time is the
// link's stamp (link.TimestampDispatcher: link/tap's read, link/pipe's
// send, a replay's capture time), or when the frame reached the stack from
// a link that stamps nothing, on the real-time clock (time.Now's), with no
// monotonic reading; the zero Time before any data. It allocates nothing.
func (c *TCPConn) RxTime() time.Time { return rxTime(c.rx.Load()) }

// CloseWrite shuts down the sending side (sends FIN); reads continue.
func (c *TCPConn) CloseWrite() error {
	if c.s.inline {
		makeStackRoom()
	}
	if err := c.ep.Shutdown(tcpip.ShutdownWrite); err != nil {
		return c.opError("close", c.cause(err))
	}
	return nil
}

// CloseRead shuts down the receiving side.
func (c *TCPConn) CloseRead() error {
	if err := c.ep.Shutdown(tcpip.ShutdownRead); err != nil {
		return c.opError("close", c.cause(err))
	}
	return nil
}

// LocalAddr returns the local address.
func (c *TCPConn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address.
func (c *TCPConn) RemoteAddr() net.Addr { return c.raddr }
