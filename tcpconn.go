package tickwire

import (
	"bytes"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// deadline is one direction's deadline: a channel that is closed when the
// deadline passes.
type deadline struct {
	mu sync.Mutex
	// +checklocks:mu
	timer *time.Timer
	// +checklocks:mu
	ch chan struct{}
}

func newDeadline() deadline { return deadline{ch: make(chan struct{})} }

// expired returns the channel to wait on; it is valid across set calls that
// only move the deadline.
func (d *deadline) expired() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}

// set arms the deadline at t; the zero t disarms it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	select {
	case <-d.ch: // it passed: a new deadline needs a fresh channel
		d.ch = make(chan struct{})
	default:
	}
	if t.IsZero() {
		return
	}
	ch := d.ch
	if dur := time.Until(t); dur <= 0 {
		close(ch)
		return
	}
	d.timer = time.AfterFunc(time.Until(t), func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		// A set that raced with this timer may have closed or replaced ch.
		if d.ch == ch {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
}

func (d *deadline) stop() {
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.mu.Unlock()
}

// sock is what the TCP and UDP wrappers share: the netstack endpoint, its
// waiter queue with one permanently registered entry per direction (so that
// blocking allocates nothing), the deadlines and the closed state.
type sock struct {
	ep tcpip.Endpoint
	wq *waiter.Queue

	readEntry waiter.Entry
	readCh    chan struct{}
	rd        deadline

	writeEntry waiter.Entry
	writeCh    chan struct{}
	wd         deadline

	closed atomic.Bool
	done   chan struct{}

	// busyPoll is how long a wait spins first (Config.BusyPoll; 0 outside
	// latency mode).
	busyPoll time.Duration
}

func (k *sock) init(wq *waiter.Queue, ep tcpip.Endpoint, busyPoll time.Duration) {
	k.ep, k.wq, k.busyPoll = ep, wq, busyPoll
	k.rd, k.wd = newDeadline(), newDeadline()
	k.done = make(chan struct{})
	k.readEntry, k.readCh = waiter.NewChannelEntry(waiter.ReadableEvents | waiter.EventHUp | waiter.EventErr)
	k.writeEntry, k.writeCh = waiter.NewChannelEntry(waiter.WritableEvents | waiter.EventHUp | waiter.EventErr)
	wq.EventRegister(&k.readEntry)
	wq.EventRegister(&k.writeEntry)
}

// handlerLoop is the body of a handler's own goroutine: it calls run
// whenever the socket may hold something for the handler, until run reports
// finished, Close, or stop (the Stack's Close). Before sleeping it spins for
// busyPoll; a run that found work starts the spin afresh.
func (k *sock) handlerLoop(stop <-chan struct{}, run func() (found, finished bool)) {
	spin := spinner{budget: k.busyPoll}
	for {
		found, finished := run()
		if finished {
			return
		}
		if found {
			spin = spinner{budget: k.busyPoll}
		}
		select {
		case <-k.readCh:
			continue
		case <-k.done:
			return
		case <-stop:
			return
		default:
		}
		if spin.again() {
			continue
		}
		select {
		case <-k.readCh:
		case <-k.done:
			return
		case <-stop:
			return
		}
	}
}

// shut closes the endpoint once, reporting false when already closed.
func (k *sock) shut() bool {
	if !k.closed.CompareAndSwap(false, true) {
		return false
	}
	close(k.done)
	k.ep.Close()
	k.wq.EventUnregister(&k.readEntry)
	k.wq.EventUnregister(&k.writeEntry)
	k.rd.stop()
	k.wd.stop()
	return true
}

// check returns the error a call must fail with before trying: closed or
// past its deadline.
func (k *sock) check(expired <-chan struct{}) error {
	if k.closed.Load() {
		return net.ErrClosed
	}
	select {
	case <-expired:
		return os.ErrDeadlineExceeded
	default:
		return nil
	}
}

// wait blocks until ch signals, the deadline passes or the socket closes.
func (k *sock) wait(ch, expired <-chan struct{}) {
	select {
	case <-ch:
	case <-expired:
	case <-k.done:
	}
}

// cause converts a netstack error, reporting net.ErrClosed after Close.
func (k *sock) cause(err tcpip.Error) error {
	if k.closed.Load() {
		return net.ErrClosed
	}
	return convertError(err)
}

// SetDeadline sets both deadlines.
func (k *sock) SetDeadline(t time.Time) error {
	k.rd.set(t)
	k.wd.set(t)
	return nil
}

// SetReadDeadline sets the deadline for pending and future reads.
func (k *sock) SetReadDeadline(t time.Time) error {
	k.rd.set(t)
	return nil
}

// SetWriteDeadline sets the deadline for pending and future writes.
func (k *sock) SetWriteDeadline(t time.Time) error {
	k.wd.set(t)
	return nil
}

// TCPConn is a TCP connection from DialTCP, Accept or ServeTCP: a thin
// wrapper over a netstack TCP endpoint and its waiter queue. It implements
// net.Conn; OnReceive switches it to the fast receive path. It holds one
// MaxConnections slot until Close.
//
// All methods are safe for concurrent use; concurrent Reads (and concurrent
// Writes) are serialised. Read and Write allocate nothing in steady state.
type TCPConn struct {
	sock
	s     *Stack
	laddr *net.TCPAddr
	raddr *net.TCPAddr

	// tep is the netstack endpoint and sy the stack's syncer, both nil
	// unless latency mode processes TCP synchronously.
	tep *tcp.Endpoint
	sy  *syncer

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
}

var _ net.Conn = (*TCPConn)(nil)

func (s *Stack) newTCPConn(wq *waiter.Queue, ep tcpip.Endpoint) *TCPConn {
	c := &TCPConn{s: s}
	c.init(wq, ep, s.cfg.BusyPoll)
	if s.sy != nil {
		c.tep, _ = ep.(*tcp.Endpoint)
		if c.tep != nil {
			c.sy = s.sy
			c.sy.flows.add(c.tep)
		}
	}
	if a, err := ep.GetLocalAddress(); err == nil {
		c.laddr = &net.TCPAddr{IP: a.Addr.AsSlice(), Port: int(a.Port)}
	}
	if a, err := ep.GetRemoteAddress(); err == nil {
		c.raddr = &net.TCPAddr{IP: a.Addr.AsSlice(), Port: int(a.Port)}
	}
	return c
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
	c.s.wire.hold()
	return true
}

func (c *TCPConn) release(held bool) {
	if !held {
		return
	}
	c.s.wire.release()
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
	expired := c.rd.expired()
	spin := spinner{budget: c.busyPoll}
	for {
		if err := c.check(expired); err != nil {
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
		switch err.(type) {
		case nil:
			return res.Count, nil
		case *tcpip.ErrWouldBlock:
			if !spin.again() {
				c.wait(c.readCh, expired)
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
// it busy-polls for up to Config.BusyPoll first. It does NOT take ownership
// of b: the bytes are copied into the send buffer before it returns. Called
// while the connection's OnReceive handler runs, it does not wait for room
// (see ErrWouldBlock).
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
		c.wr.Reset(b[n:])
		held := c.hold()
		frozen := c.sy.stamp().freeze() // one clock reading for the segments this builds
		m, err := c.ep.Write(&c.wr, tcpip.WriteOptions{})
		c.sy.stamp().thaw(frozen)
		c.release(held)
		c.wr.Reset(nil)
		n += int(m)
		switch err.(type) {
		case nil:
		case *tcpip.ErrWouldBlock:
			if c.recv.running.Load() {
				return n, c.opError("write", ErrWouldBlock)
			}
			if !spin.again() {
				c.wait(c.writeCh, expired)
			}
		default:
			return n, c.opError("write", c.cause(err))
		}
	}
}

// Close closes the connection (with a RST when unread data remains, as
// Linux does) and frees its MaxConnections slot. Blocked Reads and Writes
// return net.ErrClosed; an OnReceive handler is not called again. It may be
// called from the handler. A second Close returns an error wrapping
// net.ErrClosed.
func (c *TCPConn) Close() error {
	if c.sy != nil {
		c.sy.flows.remove(c.tep)
	}
	if !c.shut() {
		return c.opError("close", net.ErrClosed)
	}
	c.stopReceiving()
	c.s.conns.release()
	return nil
}

// CloseWrite shuts down the sending side (sends FIN); reads continue.
func (c *TCPConn) CloseWrite() error {
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
