package tickwire

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/waiter"
)

// TCPHandler receives a connection's bytes (see TCPConn.OnReceive). data is
// valid until the handler returns; the stack reuses its memory (for any
// connection's handler) after the call returns. The last call has data == nil and err != nil: io.EOF
// after the peer's FIN, or the error a Read would have returned.
type TCPHandler func(c *TCPConn, data []byte, err error)

// Inline states of a TCPConn with a handler (TCPConn.inline).
const (
	inlineIdle    = iota // nobody is processing the connection synchronously
	inlineActive         // the syncer is processing it; readability is noted, not signalled
	inlinePending        // it became readable while the syncer processed it
)

// receiver is the OnReceive state of a TCPConn.
type receiver struct {
	set     atomic.Bool // a handler is installed; Read is refused
	handler TCPHandler  // immutable once set is true
	entry   waiter.Entry

	// mu serialises handler calls; more asks its holder for another round
	// (someone found data while the handler ran).
	mu   sync.Mutex
	more atomic.Bool
	// +checklocks:mu
	w        tcpip.SliceWriter
	finished atomic.Bool // the last call was made
	running  atomic.Bool // the handler is running: Write does not wait
}

// handlerListener turns readability into a handler run: noted for the
// syncer when it is processing the connection (it runs the handler right
// after, on its goroutine), else signalled to the connection's goroutine.
type handlerListener struct{ c *TCPConn }

// NotifyEvent implements waiter.EventListener.
func (l handlerListener) NotifyEvent(waiter.EventMask) {
	c := l.c
	if c.inline.CompareAndSwap(inlineActive, inlinePending) {
		return
	}
	signal(c.readCh)
}

// OnReceive switches c to the handler API: from now on, handler is
// called with the bytes c receives, in order, one call at a time, and Read
// fails with ErrHandlerSet. Use it instead of Read when a reply must leave as
// soon as a request arrives (order entry, echo, request/response): in
// latency mode the handler runs on the goroutine that processed the segment
// (the link's reader, or the peer's writer over link/pipe), right after
// netstack's TCP processing, so no goroutine is woken between the wire and
// the handler, and a Write from the handler leaves on that same goroutine.
// Outside latency mode, or when the segment went through netstack's
// processors, the handler runs on a goroutine of the connection's own that
// waits for readability (busy-polling first in latency mode); in stock
// mode that goroutine runs netstack's processing of the segment itself, as
// a Read does (no processor goroutine woken in between).
//
// The handler may call Write, CloseWrite and Close on c. It must not block:
// while it runs, the delivering goroutine delivers nothing else (not even the
// ACKs that would make room in a send buffer). So while the handler runs,
// Write on c does not wait for room: it writes what fits and returns an
// error wrapping ErrSendBufferFull with the count written. A Write on another
// connection from a handler does wait when that connection's send buffer is
// full, and can deadlock the link (the ACKs it waits for would be delivered
// by the goroutine it blocks): write to other connections from elsewhere. Bytes are handed over in chunks of at most
// Config.ReceiveBuffer; data is valid until the handler returns.
//
// OnReceive fails with ErrHandlerSet when c already has a handler and with
// net.ErrClosed after Close. Bytes received before the call are handed to the
// handler first. net.Conn's Read suits programs that own a goroutine per
// connection and tolerate a wake-up per message; OnReceive suits the hot path.
func (c *TCPConn) OnReceive(handler TCPHandler) error {
	if handler == nil {
		return c.opError("receive", errors.New("tickwire: nil handler"))
	}
	c.readMu.Lock() // no Read in progress from here on
	defer c.readMu.Unlock()
	if c.closed.Load() {
		return c.opError("receive", net.ErrClosed)
	}
	if c.recv.set.Load() {
		return c.opError("receive", ErrHandlerSet)
	}
	c.recv.handler = handler
	c.recv.set.Store(true)

	c.wq.EventUnregister(&c.readEntry)
	c.recv.entry.Init(handlerListener{c}, waiter.ReadableEvents|waiter.EventHUp|waiter.EventErr)
	c.wq.EventRegister(&c.recv.entry)
	if c.sy != nil {
		c.sy.handlers.Store(c.tep, c)
		c.sy.nhandlers.Add(1)
	}
	c.s.goroutines.Add(1)
	go c.receiveLoop()
	signal(c.readCh) // bytes that arrived before the handler
	return nil
}

// stopReceiving undoes OnReceive's registrations at Close.
func (c *TCPConn) stopReceiving() {
	if !c.recv.set.Load() {
		return
	}
	c.wq.EventUnregister(&c.recv.entry)
	if c.sy != nil {
		if _, ok := c.sy.handlers.LoadAndDelete(c.tep); ok {
			c.sy.nhandlers.Add(-1)
		}
	}
}

// receiveLoop runs the handler whenever the connection becomes readable and
// nobody else ran it, until the last call, Close or the Stack's Close.
func (c *TCPConn) receiveLoop() {
	defer c.s.goroutines.Done()
	if c.handEP != nil {
		c.handedReceiveLoop()
		return
	}
	c.handlerLoop(c.s.done, func() (found, finished bool) {
		c.runHandler()
		return false, c.recv.finished.Load()
	})
}

// handedReceiveLoop is receiveLoop in stock mode: between drains the
// goroutine waits in hand-off as a Read does (handoff.go), so that a
// segment for the handler is processed here, instead of by a netstack
// processor that would then wake this goroutine, and its ACK rides on the
// handler's answer or is settled once per drain. It is the only goroutine
// that runs the handler (the syncer does only in latency mode) and so the
// only one to touch the hand-off and ackDue, as Read is for a reader.
func (c *TCPConn) handedReceiveLoop() {
	if c.lockThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	for {
		c.runHandler()
		if c.recv.finished.Load() {
			return
		}
		select {
		case <-c.done:
			return
		case <-c.s.done:
			return
		default:
		}
		c.waitRead(c.s.done)
	}
}

// runHandler hands whatever c has received to the handler, unless another
// goroutine is doing so: then it asks that one for another round.
// +checklocksignore: TryLock, which checklocks cannot follow.
func (c *TCPConn) runHandler() {
	r := &c.recv
	if !r.mu.TryLock() {
		r.more.Store(true)
		return
	}
	for {
		r.more.Store(false)
		c.drainLocked()
		r.mu.Unlock()
		if !r.more.Load() || !r.mu.TryLock() {
			return
		}
	}
}

// drainLocked reads until nothing is left, calling the handler for each
// chunk, and makes the last call on EOF or error.
//
// +checklocks:c.recv.mu
func (c *TCPConn) drainLocked() {
	r := &c.recv
	bp := c.s.handlerBuf()
	defer c.s.handlerBufs.Put(bp)
	buf := *bp
	for !r.finished.Load() && !c.closed.Load() {
		r.w = buf
		held := c.hold()
		res, err := c.ep.Read(&r.w, tcpip.ReadOptions{})
		c.release(held)
		r.w = nil
		if err == nil {
			c.moderate(res.Count) // first, so that the window update below announces any growth
		}
		c.afterHandoffRead(err == nil) // stock mode: see handedReceiveLoop
		switch err.(type) {
		case nil:
			c.sy.afterRead(c.tep)
			c.received(res.Count)
			r.running.Store(true)
			r.handler(c, buf[:res.Count], nil)
			r.running.Store(false)
		case *tcpip.ErrWouldBlock:
			return
		case *tcpip.ErrClosedForReceive:
			r.finished.Store(true)
			r.running.Store(true)
			r.handler(c, nil, io.EOF)
			r.running.Store(false)
		default:
			r.finished.Store(true)
			r.running.Store(true)
			r.handler(c, nil, c.opError("read", c.cause(err)))
			r.running.Store(false)
		}
	}
}

// handlerBuf lends a Config.ReceiveBuffer-sized buffer for one drain of a
// handler connection (return it to s.handlerBufs): an idle connection
// holds none (10,000 idle handler connections held 320 MiB of them), and a
// drain takes one that another connection's drain left warm in the cache.
func (s *Stack) handlerBuf() *[]byte {
	if bp, ok := s.handlerBufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, s.cfg.ReceiveBuffer)
	return &b
}

// ServeTCP listens on port (0 picks a free port) and installs handler on
// every connection it accepts (see TCPConn.OnReceive), accepting on a
// goroutine of its own. Closing the returned listener stops accepting;
// accepted connections live on until the handler (or the program) closes
// them, or the Stack closes. Each counts against Config.MaxConnections.
func (s *Stack) ServeTCP(port uint16, handler TCPHandler) (*TCPListener, error) {
	if handler == nil {
		return nil, opError("listen", "tcp", nil, nil, errors.New("tickwire: nil handler"))
	}
	ln, err := s.ListenTCP(port)
	if err != nil {
		return nil, err
	}
	s.goroutines.Add(1)
	go func() {
		defer s.goroutines.Done()
		for {
			c, err := ln.accept(context.Background(), false) // SetDeadline is the program's, not ours
			if err != nil {
				return
			}
			c.OnReceive(handler) // cannot fail on a fresh connection
		}
	}()
	return ln, nil
}
