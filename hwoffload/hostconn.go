package hwoffload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The host path seen as package net's interfaces: Device.Listen, Dial and
// ListenUDP issue commands on the command ring and a dispatcher goroutine
// (started by the first of them, stopped by Device.Close) consumes ring 3:
// while it runs, the program must not read ring 3 itself.

var (
	// ErrNoSession is returned by Dial when all Sessions are in use.
	ErrNoSession = errors.New("hwoffload: no free session")
	// ErrNoHostPath is returned when the device's region has no host path
	// (its CMD_SLOT_BYTES is not CmdSlotBytes).
	ErrNoHostPath = errors.New("hwoffload: device has no host path")
)

// HostError is a host-path command that completed with a status other than
// StatusOK.
type HostError struct {
	Op     string
	Status HostStatus
}

func (e *HostError) Error() string {
	name := fmt.Sprint(uint16(e.Status))
	for _, s := range HostStatuses {
		if s.Status == e.Status {
			name = s.Name
		}
	}
	return "hwoffload: " + e.Op + ": " + name
}

// hostPoll is how often waits on the host path look at the registers when no
// notification came (a notification lost to a full ring 3 costs that much).
const hostPoll = time.Millisecond

// udpSlot is the part of the UDP send area a datagram in flight uses.
const udpSlot = 2048

type completion struct {
	st    HostStatus
	port  uint16
	n     uint32
	reset bool // RESET ended the command: net.ErrClosed
}

// waiter is a command waiting for its completion. Waiters are recycled
// (hostClient.free), so waiting allocates nothing in steady state.
type waiter struct {
	ch chan completion // buffered: the dispatcher never blocks on it
	t  *time.Timer     // for doTimeout; stopped while idle
	// udpSlot is the UDP send area slot the command uses, -1 none: the
	// dispatcher frees it when the completion comes (the engine reads the
	// datagram until then), not when the waiter gives up.
	udpSlot int
	// abandoned: the waiter gave up; the dispatcher recycles it when the
	// completion comes. Guarded by hostClient.mu.
	abandoned bool
}

// hostClient is the Device's side of the host path.
type hostClient struct {
	d       *Device
	cmdBase int
	cmdMask uint32

	cmdMu   sync.Mutex
	cmdProd uint32 // guarded by cmdMu
	tag     atomic.Uint32

	mu        sync.Mutex
	waiters   map[uint32]*waiter     // by tag; guarded by mu
	free      []*waiter              // recycled waiters; guarded by mu
	conns     [Sessions]*Conn        // guarded by mu
	busy      [Sessions]bool         // guarded by mu
	listeners map[uint16]*Listener   // guarded by mu
	udp       map[uint16]*PacketConn // guarded by mu

	// ringMu is held by the dispatcher around each look at ring 3, and
	// by Device.Reset.
	ringMu   sync.Mutex
	udpSlots chan int    // free slots of the UDP send area
	cmdTimer *time.Timer // submit's wait for room; guarded by cmdMu
	stop     chan struct{}
	done     chan struct{}
}

// host returns the device's host path, starting its dispatcher.
func (d *Device) host() (*hostClient, error) {
	d.hostOnce.Do(func() {
		r := d.r
		base := r.Load64(RegCmdBase)
		log2 := r.Load32(RegCmdLog2Slots)
		if r.Load32(RegCmdSlotBytes) != CmdSlotBytes || log2 > 16 || base < WindowBytes ||
			!r.InRange(base, uint64(CmdSlotBytes)<<log2) || r.Load32(RegSessions) != Sessions ||
			r.Load32(RegSessBufBytes) != SessBufBytes ||
			!r.InRange(r.Load64(RegSessBase), Sessions*2*SessBufBytes) ||
			!r.InRange(r.Load64(RegUDPRxBase), UDPAreaBytes) || !r.InRange(r.Load64(RegUDPTxBase), UDPAreaBytes) ||
			r.Load32(RegUDPRxBytes) != UDPAreaBytes || r.Load32(RegUDPTxBytes) != UDPAreaBytes {
			d.hostErr = ErrNoHostPath
			return
		}
		h := &hostClient{d: d, cmdBase: int(base), cmdMask: 1<<log2 - 1, cmdProd: r.Load32(RegCmdProd),
			waiters: map[uint32]*waiter{}, listeners: map[uint16]*Listener{}, udp: map[uint16]*PacketConn{},
			udpSlots: make(chan int, UDPAreaBytes/udpSlot), stop: make(chan struct{}), done: make(chan struct{}),
			cmdTimer: stoppedTimer()}
		for i := range UDPAreaBytes / udpSlot {
			h.udpSlots <- i * udpSlot
		}
		for i := range Sessions {
			h.busy[i] = r.Load32(SessReg(i, SessState)) != SessFree
		}
		d.hostc = h
		d.hostRunning.Store(h)
		go h.dispatch()
	})
	return d.hostc, d.hostErr
}

// closeHost stops the dispatcher.
func (d *Device) closeHost() {
	if h := d.hostc; h != nil {
		close(h.stop)
		<-h.done
	}
}

// stoppedTimer returns a timer that is not running, for reuse with Reset.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// sleepT sleeps d on the idle timer t, or until ctx or stop is done; it
// allocates nothing.
func sleepT(ctx context.Context, t *time.Timer, d time.Duration, stop <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.Reset(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return net.ErrClosed
	case <-t.C:
		return nil
	}
}

// getWaiter returns an idle waiter for udpSlot (-1 none).
func (h *hostClient) getWaiter(udpSlot int) *waiter {
	h.mu.Lock()
	var w *waiter
	if n := len(h.free); n > 0 {
		w = h.free[n-1]
		h.free = h.free[:n-1]
	}
	h.mu.Unlock()
	if w == nil {
		w = &waiter{ch: make(chan completion, 1), t: stoppedTimer()}
	}
	w.udpSlot, w.abandoned = udpSlot, false
	return w
}

// recycle frees w's UDP slot and keeps w for reuse. Called with h.mu held.
func (h *hostClient) recycle(w *waiter) {
	if w.udpSlot >= 0 {
		h.udpSlots <- w.udpSlot // never blocks: the channel holds every slot
		w.udpSlot = -1
	}
	h.free = append(h.free, w)
}

// submit writes a command; with w, its completion goes to w. It returns an
// error when ctx ends while the command ring is full.
func (h *hostClient) submit(ctx context.Context, c Command, w *waiter) error {
	c.Tag = h.tag.Add(1)
	if w != nil {
		h.mu.Lock()
		h.waiters[c.Tag] = w
		h.mu.Unlock()
	}
	r := h.d.r
	h.cmdMu.Lock()
	defer h.cmdMu.Unlock()
	for h.cmdProd-r.Load32(RegCmdCons) > h.cmdMask {
		if err := sleepT(ctx, h.cmdTimer, waitPoll, h.stop); err != nil {
			if w != nil {
				h.mu.Lock()
				delete(h.waiters, c.Tag)
				h.recycle(w)
				h.mu.Unlock()
			}
			return err
		}
	}
	off := h.cmdBase + int(h.cmdProd&h.cmdMask)*CmdSlotBytes
	CmdSlot(r.Bytes()[off : off+CmdSlotBytes]).Put(c)
	h.cmdProd++
	r.Store32(RegCmdProd, h.cmdProd)
	return nil
}

// abandon gives w up: the dispatcher recycles it (and frees its UDP slot)
// when the completion comes, or w is recycled here if it came already.
func (h *hostClient) abandon(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-w.ch:
		h.recycle(w)
	default:
		w.abandoned = true
	}
}

// do submits c and waits for its completion until ctx is done.
func (h *hostClient) do(ctx context.Context, name string, c Command) (completion, error) {
	return h.wait(ctx, 0, name, c, -1)
}

// wait submits c (whose UDP send slot is udpSlot, -1 none) and waits for
// its completion until ctx is done or, when timeout is not 0, timeout has
// passed. Waiting allocates nothing.
func (h *hostClient) wait(ctx context.Context, timeout time.Duration, name string, c Command, udpSlot int) (completion, error) {
	w := h.getWaiter(udpSlot)
	if err := h.submit(ctx, c, w); err != nil {
		return completion{}, err
	}
	var t <-chan time.Time
	if timeout > 0 {
		w.t.Reset(timeout)
		defer w.t.Stop()
		t = w.t.C
	}
	select {
	case res := <-w.ch:
		h.mu.Lock()
		h.recycle(w)
		h.mu.Unlock()
		switch {
		case res.reset:
			return res, net.ErrClosed
		case res.st != StatusOK:
			return res, &HostError{Op: name, Status: res.st}
		}
		return res, nil
	case <-ctx.Done():
		h.abandon(w)
		return completion{}, ctx.Err()
	case <-t:
		h.abandon(w)
		return completion{}, os.ErrDeadlineExceeded
	case <-h.stop:
		return completion{}, net.ErrClosed
	}
}

// dispatch consumes ring 3.
func (h *hostClient) dispatch() {
	defer close(h.done)
	ring := h.d.Ring(RingHost)
	idle := stoppedTimer()
	for {
		h.ringMu.Lock()
		s, _, ok := ring.Read()
		if ok {
			h.handle(s)
		}
		h.ringMu.Unlock()
		if !ok && sleepT(context.Background(), idle, 50*time.Microsecond, h.stop) != nil {
			return
		}
	}
}

// resetDone brings the host side in step with a RESET: ring 3 read from
// its start, every session free, its Conn failing with net.ErrClosed, the
// command ring from 0. Called by Device.Reset with ringMu held.
func (h *hostClient) resetDone() {
	h.d.rings[RingHost].sync()
	h.cmdMu.Lock()
	h.cmdProd = 0
	h.cmdMu.Unlock()
	h.mu.Lock()
	conns := h.conns
	h.conns = [Sessions]*Conn{}
	h.busy = [Sessions]bool{}
	// The engine forgot the commands in flight: their waiters fail, and
	// the UDP send area is free again.
	for tag, w := range h.waiters {
		delete(h.waiters, tag)
		if w.abandoned {
			h.recycle(w)
		} else {
			if w.udpSlot >= 0 {
				h.udpSlots <- w.udpSlot
				w.udpSlot = -1
			}
			w.ch <- completion{reset: true}
		}
	}
	h.mu.Unlock()
	for _, c := range conns {
		if c != nil {
			c.closed.Store(true)
			c.wake()
		}
	}
}

func (h *hostClient) handle(s Slot) {
	session := s.Flow()
	switch s.Kind() {
	case KindCompletion:
		tag, op, st, port, n := s.Completion()
		h.mu.Lock()
		w := h.waiters[tag]
		delete(h.waiters, tag)
		if w != nil {
			if w.abandoned {
				h.recycle(w)
			} else {
				if w.udpSlot >= 0 { // the engine is done with the datagram
					h.udpSlots <- w.udpSlot
					w.udpSlot = -1
				}
				w.ch <- completion{st: st, port: port, n: n} // buffered, empty
			}
		}
		var c *Conn
		if session < Sessions {
			c = h.conns[session]
			switch {
			case op == OpClose && st == StatusOK, op == OpOpen && st != StatusOK:
				h.busy[session] = false
				h.conns[session] = nil
			}
		}
		h.mu.Unlock()
		if c != nil && op == OpSend {
			if st != StatusOK {
				c.setErr(&HostError{Op: "SEND", Status: st})
			}
			c.wakeWriter()
		}
	case KindAccepted:
		lp, rp, rip := s.Accepted()
		if session >= Sessions {
			return
		}
		h.mu.Lock()
		ln := h.listeners[lp]
		c := newConn(h, int(session), netip.AddrPortFrom(AddrFromReg(h.d.r.Load32(RegIPAddr)), lp), netip.AddrPortFrom(AddrFromReg(rip), rp))
		h.busy[session] = true
		h.conns[session] = c
		h.mu.Unlock()
		if ln == nil || !ln.offer(c) {
			c.Close()
		}
	case KindRecv:
		if c := h.conn(session); c != nil {
			c.wakeReader()
		}
	case KindPeerClosed:
		if c := h.conn(session); c != nil {
			c.peerClosed.Store(true)
			if s[PeerClosedReset] != 0 {
				c.setErr(&HostError{Op: "read", Status: StatusNetwork})
			}
			c.wake()
		}
	case KindUDPRecv:
		lp, rp, rip, pos, n := s.UDPRecv()
		r := h.d.r
		h.mu.Lock()
		pc := h.udp[lp]
		h.mu.Unlock()
		if pc != nil && n <= MaxDatagram {
			at := int(r.Load64(RegUDPRxBase)) + int(pos%UDPAreaBytes)
			pc.offer(r.Bytes()[at:at+int(n)], netip.AddrPortFrom(AddrFromReg(rip), rp))
		}
		r.Store32(RegUDPRxCons, pos+n)
	}
}

func (h *hostClient) conn(session uint32) *Conn {
	if session >= Sessions {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[session]
}

// AddrFromReg returns the IPv4 address of a register value
// a<<24|b<<16|c<<8|d.
func AddrFromReg(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// RegFromAddr returns the register value of IPv4 address a (0 for an
// address that is not IPv4).
func RegFromAddr(a netip.Addr) uint32 {
	a = a.Unmap()
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

// Listen issues LISTEN for port (0: the engine picks one) and returns a
// net.Listener whose Accept returns the connections the engine accepts on
// it, each a *Conn in a session of its own.
func (d *Device) Listen(ctx context.Context, port uint16) (*Listener, error) {
	h, err := d.host()
	if err != nil {
		return nil, err
	}
	res, err := h.do(ctx, "LISTEN", Command{Op: OpListen, Port: port})
	if err != nil {
		return nil, err
	}
	ln := &Listener{h: h, port: res.port, ch: make(chan *Conn, Sessions), closed: make(chan struct{})}
	h.mu.Lock()
	h.listeners[res.port] = ln
	h.mu.Unlock()
	return ln, nil
}

// Listener is a LISTEN port: a net.Listener.
type Listener struct {
	h      *hostClient
	port   uint16
	ch     chan *Conn
	once   sync.Once
	closed chan struct{}
}

func (l *Listener) offer(c *Conn) bool {
	select {
	case <-l.closed:
		return false
	default:
	}
	select {
	case l.ch <- c:
		return true
	default:
		return false
	}
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close issues UNLISTEN; connections already accepted stay open.
func (l *Listener) Close() error {
	l.once.Do(func() { unbind(l.h, l.h.listeners, l.closed, "UNLISTEN", OpUnlisten, l.port) })
	return nil
}

// unbind closes a Listener or PacketConn: closed, out of the table m, and
// the command op issued (best effort: the engine may be gone).
func unbind[T any](h *hostClient, m map[uint16]T, closed chan struct{}, name string, op uint16, port uint16) {
	close(closed)
	h.mu.Lock()
	delete(m, port)
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.do(ctx, name, Command{Op: op, Port: port}) //nolint:errcheck // best effort
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(AddrFromReg(l.h.d.r.Load32(RegIPAddr)), l.port))
}

// Dial issues OPEN to addr in a free session and waits for the handshake.
func (d *Device) Dial(ctx context.Context, addr netip.AddrPort) (*Conn, error) {
	h, err := d.host()
	if err != nil {
		return nil, err
	}
	if !addr.Addr().Is4() {
		return nil, fmt.Errorf("hwoffload: %v is not IPv4", addr)
	}
	h.mu.Lock()
	id := slices.Index(h.busy[:], false)
	if id < 0 {
		h.mu.Unlock()
		return nil, ErrNoSession
	}
	h.busy[id] = true
	h.mu.Unlock()
	res, err := h.do(ctx, "OPEN", Command{Op: OpOpen, Session: uint16(id), IP: RegFromAddr(addr.Addr()), Port: addr.Port()})
	if err != nil {
		if ctx.Err() != nil { // the OPEN may still complete: close it then
			h.submit(context.Background(), Command{Op: OpClose, Session: uint16(id)}, nil) //nolint:errcheck
		}
		return nil, err
	}
	c := newConn(h, id, netip.AddrPortFrom(AddrFromReg(d.r.Load32(RegIPAddr)), res.port), addr)
	h.mu.Lock()
	h.conns[id] = c
	h.mu.Unlock()
	return c, nil
}

// Conn is a TCP connection of the host path, in one session: a net.Conn.
// Read copies out of the session's RX buffer, Write into its TX buffer
// and issues SEND. Reads (and Writes) are serialised.
type Conn struct {
	h             *hostClient
	id            int
	local, remote netip.AddrPort
	rx, tx        []byte
	rnotify       chan struct{} // RECV, PEER_CLOSED, Close, deadline
	wnotify       chan struct{} // SEND completions, Close, deadline
	rt, wt        *time.Timer   // Read's and Write's waits
	peerClosed    atomic.Bool
	closed        atomic.Bool
	err           atomic.Pointer[error]
	readMu        sync.Mutex
	rxCons        uint32 // guarded by readMu
	writeMu       sync.Mutex
	txProd        uint32 // guarded by writeMu
	rdl, wdl      atomic.Int64
	closeOnce     sync.Once
}

func newConn(h *hostClient, id int, local, remote netip.AddrPort) *Conn {
	r := h.d.r
	off := int(r.Load64(RegSessBase)) + id*2*SessBufBytes
	b := r.Bytes()
	return &Conn{h: h, id: id, local: local, remote: remote, rnotify: make(chan struct{}, 1),
		wnotify: make(chan struct{}, 1), rt: stoppedTimer(), wt: stoppedTimer(),
		rx: b[off : off+SessBufBytes : off+SessBufBytes], tx: b[off+SessBufBytes : off+2*SessBufBytes : off+2*SessBufBytes],
		rxCons: r.Load32(SessReg(id, SessRxCons)), txProd: r.Load32(SessReg(id, SessTxProd))}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *Conn) wakeReader() { notify(c.rnotify) }
func (c *Conn) wakeWriter() { notify(c.wnotify) }
func (c *Conn) wake()       { c.wakeReader(); c.wakeWriter() }

func (c *Conn) setErr(err error) { c.err.CompareAndSwap(nil, &err) }

// Session returns the connection's session number.
func (c *Conn) Session() int { return c.id }

// wait waits on timer t for a notification on ch, the deadline dl (unix
// ns, 0 none) or hostPoll (a RECV dropped for a full ring 3 costs that
// much); it allocates nothing.
func (c *Conn) wait(ch chan struct{}, t *time.Timer, dl int64) error {
	d := hostPoll
	if dl != 0 {
		left := time.Until(time.Unix(0, dl))
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		d = min(d, left)
	}
	t.Reset(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-c.h.stop:
		return net.ErrClosed
	}
	return nil
}

// Read reads bytes the peer sent; io.EOF after the peer's FIN.
func (c *Conn) Read(b []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	r := c.h.d.r
	for {
		if c.closed.Load() {
			return 0, net.ErrClosed
		}
		peerClosed := c.peerClosed.Load()
		prod := r.Load32(SessReg(c.id, SessRxProd))
		if avail := prod - c.rxCons; avail > 0 && avail <= SessBufBytes {
			if len(b) == 0 {
				return 0, nil
			}
			at := c.rxCons % SessBufBytes
			n := copy(b[:min(uint32(len(b)), avail)], c.rx[at:])
			if uint32(n) < avail && n < len(b) {
				n += copy(b[n:min(uint32(len(b)), avail)], c.rx[:])
			}
			c.rxCons += uint32(n)
			r.Store32(SessReg(c.id, SessRxCons), c.rxCons)
			return n, nil
		}
		if peerClosed {
			if e := c.err.Load(); e != nil {
				return 0, *e
			}
			return 0, io.EOF
		}
		if err := c.wait(c.rnotify, c.rt, c.rdl.Load()); err != nil {
			return 0, err
		}
	}
}

// Write copies b into the TX buffer as room frees and issues a SEND per
// copy; it returns once every byte is handed to the engine.
func (c *Conn) Write(b []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	r := c.h.d.r
	done := 0
	for done < len(b) {
		if c.closed.Load() {
			return done, net.ErrClosed
		}
		if e := c.err.Load(); e != nil {
			return done, *e
		}
		free := SessBufBytes - (c.txProd - r.Load32(SessReg(c.id, SessTxCons)))
		if free == 0 || free > SessBufBytes {
			if err := c.wait(c.wnotify, c.wt, c.wdl.Load()); err != nil {
				return done, err
			}
			continue
		}
		n := min(int(free), len(b)-done)
		at := c.txProd % SessBufBytes
		k := copy(c.tx[at:], b[done:done+n])
		copy(c.tx, b[done+k:done+n])
		if err := c.h.submit(context.Background(), Command{Op: OpSend, Session: uint16(c.id), Length: uint32(n)}, nil); err != nil {
			return done, err
		}
		c.txProd += uint32(n)
		done += n
	}
	return done, nil
}

// Close issues CLOSE; the session is free again once the engine completes
// it.
func (c *Conn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.wake()
		err = c.h.submit(context.Background(), Command{Op: OpClose, Session: uint16(c.id)}, nil)
	})
	return err
}

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return net.TCPAddrFromAddrPort(c.local) }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.remote) }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func deadlineNs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// SetReadDeadline sets the read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error { c.rdl.Store(deadlineNs(t)); c.wake(); return nil }

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wdl.Store(deadlineNs(t)); c.wake(); return nil }

// ListenUDP issues UDP_BIND for port (0: the engine picks one) and returns
// a net.PacketConn on it. Received datagrams are copied out of the UDP
// receive area by the dispatcher into a queue of udpQueue datagrams (more
// are dropped and counted in Dropped).
func (d *Device) ListenUDP(ctx context.Context, port uint16) (*PacketConn, error) {
	h, err := d.host()
	if err != nil {
		return nil, err
	}
	res, err := h.do(ctx, "UDP_BIND", Command{Op: OpUDPBind, Port: port})
	if err != nil {
		return nil, err
	}
	pc := &PacketConn{h: h, port: res.port, ch: make(chan datagram, udpQueue), bufs: make(chan []byte, udpQueue),
		closed: make(chan struct{}), rt: stoppedTimer()}
	h.mu.Lock()
	h.udp[res.port] = pc
	h.mu.Unlock()
	return pc, nil
}

// udpQueue bounds a PacketConn's received datagrams not yet read: each
// is copied into one of at most udpQueue buffers of MaxDatagram bytes
// (368 KiB), allocated as the queue first fills and reused after.
const udpQueue = 256

type datagram struct {
	b    []byte // a buffer of MaxDatagram bytes; n of them are the datagram
	n    int
	from netip.AddrPort
}

// PacketConn is a bound UDP port of the host path: a net.PacketConn.
// ReadFrom and WriteTo allocate nothing in steady state (ReadFrom's
// *net.UDPAddr is kept for a sender that repeats: ReadFromUDPAddrPort
// never allocates).
type PacketConn struct {
	h       *hostClient
	port    uint16
	ch      chan datagram
	bufs    chan []byte // free buffers
	nbufs   int         // buffers allocated; dispatcher only
	dropped atomic.Uint64
	rdl     atomic.Int64
	once    sync.Once
	closed  chan struct{}

	readMu   sync.Mutex
	rt       *time.Timer    // ReadFrom's deadline; guarded by readMu
	lastFrom netip.AddrPort // guarded by readMu
	lastAddr *net.UDPAddr   // lastFrom's, returned again; guarded by readMu
}

func (p *PacketConn) offer(b []byte, from netip.AddrPort) {
	var buf []byte
	select {
	case buf = <-p.bufs:
	default:
		if p.nbufs == udpQueue {
			p.dropped.Add(1)
			return
		}
		p.nbufs++
		buf = make([]byte, MaxDatagram)
	}
	n := copy(buf, b)
	select {
	case p.ch <- datagram{buf, n, from}:
	default:
		p.bufs <- buf
		p.dropped.Add(1)
	}
}

// Dropped returns the datagrams dropped for a full queue.
func (p *PacketConn) Dropped() uint64 { return p.dropped.Load() }

// ReadFromUDPAddrPort reads the next datagram into b and returns its
// sender; it allocates nothing.
func (p *PacketConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	p.readMu.Lock()
	defer p.readMu.Unlock()
	return p.read(b)
}

// read is ReadFromUDPAddrPort with readMu held.
func (p *PacketConn) read(b []byte) (int, netip.AddrPort, error) {
	var tc <-chan time.Time
	if dl := p.rdl.Load(); dl != 0 {
		left := time.Until(time.Unix(0, dl))
		if left <= 0 {
			return 0, netip.AddrPort{}, os.ErrDeadlineExceeded
		}
		p.rt.Reset(left)
		defer p.rt.Stop()
		tc = p.rt.C
	}
	select {
	case d := <-p.ch:
		n := copy(b, d.b[:d.n])
		p.bufs <- d.b // never blocks: it holds every buffer
		return n, d.from, nil
	case <-p.closed:
		return 0, netip.AddrPort{}, net.ErrClosed
	case <-tc:
		return 0, netip.AddrPort{}, os.ErrDeadlineExceeded
	}
}

// ReadFrom reads the next datagram. Its *net.UDPAddr is the one returned
// before when the sender is the same (it must not be modified).
func (p *PacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	p.readMu.Lock()
	defer p.readMu.Unlock()
	n, from, err := p.read(b)
	if err != nil {
		return n, nil, err
	}
	if p.lastAddr == nil || from != p.lastFrom {
		p.lastFrom, p.lastAddr = from, net.UDPAddrFromAddrPort(from)
	}
	return n, p.lastAddr, nil
}

// WriteTo sends b (at most MaxDatagram bytes) to addr, a *net.UDPAddr, and
// waits for the engine's completion (at most 5 s).
func (p *PacketConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, fmt.Errorf("hwoffload: %v is not a *net.UDPAddr", addr)
	}
	return p.WriteToUDPAddrPort(b, ua.AddrPort())
}

// WriteToUDPAddrPort is WriteTo to an IPv4 netip.AddrPort; it allocates
// nothing. The datagram's slot of the UDP send area is freed when the
// engine's completion comes, even after WriteTo gave up waiting.
func (p *PacketConn) WriteToUDPAddrPort(b []byte, ap netip.AddrPort) (int, error) {
	if !ap.Addr().Unmap().Is4() || len(b) > MaxDatagram {
		return 0, fmt.Errorf("hwoffload: datagram of %d bytes to %v: want IPv4 and at most %d bytes", len(b), ap, MaxDatagram)
	}
	select {
	case <-p.closed:
		return 0, net.ErrClosed
	default:
	}
	h := p.h
	var off int
	select {
	case off = <-h.udpSlots:
	case <-p.closed:
		return 0, net.ErrClosed
	}
	r := h.d.r
	base := int(r.Load64(RegUDPTxBase))
	copy(r.Bytes()[base+off:], b)
	res, err := h.wait(context.Background(), udpSendWait, "UDP_SEND", Command{Op: OpUDPSend, Port: p.port,
		IP: RegFromAddr(ap.Addr().Unmap()), DstPort: ap.Port(), Offset: uint32(off), Length: uint32(len(b))}, off)
	return int(res.n), err
}

// udpSendWait bounds WriteTo's wait for its completion.
const udpSendWait = 5 * time.Second

// Close issues UDP_UNBIND.
func (p *PacketConn) Close() error {
	p.once.Do(func() { unbind(p.h, p.h.udp, p.closed, "UDP_UNBIND", OpUDPUnbind, p.port) })
	return nil
}

// LocalAddr returns the bound address.
func (p *PacketConn) LocalAddr() net.Addr {
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(AddrFromReg(p.h.d.r.Load32(RegIPAddr)), p.port))
}

// SetDeadline sets the read deadline (writes wait for their completion,
// at most 5 s).
func (p *PacketConn) SetDeadline(t time.Time) error { return p.SetReadDeadline(t) }

// SetReadDeadline sets the read deadline.
func (p *PacketConn) SetReadDeadline(t time.Time) error { p.rdl.Store(deadlineNs(t)); return nil }

// SetWriteDeadline does nothing: writes wait for their completion, at most
// 5 s.
func (p *PacketConn) SetWriteDeadline(time.Time) error { return nil }

// ARPEntry is one entry of the engine's ARP table.
type ARPEntry struct {
	Addr     netip.Addr
	MAC      net.HardwareAddr
	Resolved bool
}

// ARPTable reads the ARP table's ARP_COUNT entries.
func (d *Device) ARPTable() []ARPEntry {
	n := min(int(d.r.Load32(RegARPCount)), MaxARPEntries)
	out := make([]ARPEntry, 0, n)
	for i := range n {
		hi, lo := d.r.Load32(ARPReg(i, ARPMACHi)), d.r.Load32(ARPReg(i, ARPMACLo))
		out = append(out, ARPEntry{
			Addr:     AddrFromReg(d.r.Load32(ARPReg(i, ARPAddr))),
			MAC:      net.HardwareAddr{byte(hi >> 8), byte(hi), byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)},
			Resolved: d.r.Load32(ARPReg(i, ARPFlags))&ARPResolved != 0,
		})
	}
	return out
}

var (
	_ net.Conn       = (*Conn)(nil)
	_ net.Listener   = (*Listener)(nil)
	_ net.PacketConn = (*PacketConn)(nil)
)

// Exec issues command c (its Tag is set here) and waits for its
// completion: the status, the local port and the length the engine
// reports. Listen, Dial and ListenUDP are built on the same path; Exec is
// for bring-up and conformance checks. It starts the ring 3 dispatcher as
// they do. A status other than StatusOK is returned with a *HostError.
func (d *Device) Exec(ctx context.Context, c Command) (HostStatus, uint16, uint32, error) {
	h, err := d.host()
	if err != nil {
		return 0, 0, 0, err
	}
	res, err := h.do(ctx, "command", c)
	return res.st, res.port, res.n, err
}

// ErrDispatching is returned by WriteCommand while the host path's
// dispatcher reads ring 3.
var ErrDispatching = errors.New("hwoffload: the host path's dispatcher runs (Listen, Dial, ListenUDP or Exec started it)")

// WriteCommand writes c, its Tag as given, into the command ring's next slot
// and stores CMD_PROD, without waiting: the caller reads the completion
// from ring 3 itself (Ring(RingHost)). It is for bring-up and conformance
// checks, before anything started the host path's dispatcher
// (ErrDispatching then); it returns ErrNoHostPath for a region without a
// host path and an error when the command ring is full.
func (d *Device) WriteCommand(c Command) error {
	if d.hostRunning.Load() != nil {
		return ErrDispatching
	}
	r := d.r
	base, log2 := r.Load64(RegCmdBase), r.Load32(RegCmdLog2Slots)
	if r.Load32(RegCmdSlotBytes) != CmdSlotBytes || log2 > 16 || base < WindowBytes || !r.InRange(base, uint64(CmdSlotBytes)<<log2) {
		return ErrNoHostPath
	}
	prod := r.Load32(RegCmdProd)
	if prod-r.Load32(RegCmdCons) >= 1<<log2 {
		return errors.New("hwoffload: the command ring is full")
	}
	off := int(base) + int(prod&(1<<log2-1))*CmdSlotBytes
	CmdSlot(r.Bytes()[off : off+CmdSlotBytes]).Put(c)
	r.Store32(RegCmdProd, prod+1)
	return nil
}
