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
	st   HostStatus
	port uint16
	n    uint32
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
	waiters   map[uint32]chan completion // by tag; guarded by mu
	conns     [Sessions]*Conn            // guarded by mu
	busy      [Sessions]bool             // guarded by mu
	listeners map[uint16]*Listener       // guarded by mu
	udp       map[uint16]*PacketConn     // guarded by mu

	// ringMu is held by the dispatcher around each look at ring 3, and
	// by Device.Reset.
	ringMu   sync.Mutex
	udpSlots chan int // free slots of the UDP send area
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
			waiters: map[uint32]chan completion{}, listeners: map[uint16]*Listener{}, udp: map[uint16]*PacketConn{},
			udpSlots: make(chan int, UDPAreaBytes/udpSlot), stop: make(chan struct{}), done: make(chan struct{})}
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

// submit writes a command and returns the channel its completion comes on
// (when wait), or an error when ctx ends while the ring is full.
func (h *hostClient) submit(ctx context.Context, c Command, wait bool) (chan completion, error) {
	c.Tag = h.tag.Add(1)
	var ch chan completion
	if wait {
		ch = make(chan completion, 1)
		h.mu.Lock()
		h.waiters[c.Tag] = ch
		h.mu.Unlock()
	}
	r := h.d.r
	h.cmdMu.Lock()
	defer h.cmdMu.Unlock()
	for h.cmdProd-r.Load32(RegCmdCons) > h.cmdMask {
		if err := sleepCtx(ctx, waitPoll); err != nil {
			h.forget(c.Tag)
			return nil, err
		}
	}
	off := h.cmdBase + int(h.cmdProd&h.cmdMask)*CmdSlotBytes
	CmdSlot(r.Bytes()[off : off+CmdSlotBytes]).Put(c)
	h.cmdProd++
	r.Store32(RegCmdProd, h.cmdProd)
	return ch, nil
}

func (h *hostClient) forget(tag uint32) {
	h.mu.Lock()
	delete(h.waiters, tag)
	h.mu.Unlock()
}

// do submits c and waits for its completion.
func (h *hostClient) do(ctx context.Context, name string, c Command) (completion, error) {
	ch, err := h.submit(ctx, c, true)
	if err != nil {
		return completion{}, err
	}
	select {
	case res := <-ch:
		if res.st != StatusOK {
			return res, &HostError{Op: name, Status: res.st}
		}
		return res, nil
	case <-ctx.Done():
		h.forget(c.Tag)
		return completion{}, ctx.Err()
	case <-h.stop:
		return completion{}, net.ErrClosed
	}
}

// dispatch consumes ring 3.
func (h *hostClient) dispatch() {
	defer close(h.done)
	ring := h.d.Ring(RingHost)
	for {
		h.ringMu.Lock()
		s, _, ok := ring.Read()
		if ok {
			h.handle(s)
		}
		h.ringMu.Unlock()
		if !ok {
			select {
			case <-h.stop:
				return
			case <-time.After(50 * time.Microsecond):
			}
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
		ch := h.waiters[tag]
		delete(h.waiters, tag)
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
		if ch != nil {
			ch <- completion{st, port, n}
		}
		if c != nil && op == OpSend {
			if st != StatusOK {
				c.setErr(&HostError{Op: "SEND", Status: st})
			}
			c.wake()
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
			c.wake()
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
			h.submit(context.Background(), Command{Op: OpClose, Session: uint16(id)}, false) //nolint:errcheck
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
	notify        chan struct{}
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
	return &Conn{h: h, id: id, local: local, remote: remote, notify: make(chan struct{}, 1),
		rx: b[off : off+SessBufBytes : off+SessBufBytes], tx: b[off+SessBufBytes : off+2*SessBufBytes : off+2*SessBufBytes],
		rxCons: r.Load32(SessReg(id, SessRxCons)), txProd: r.Load32(SessReg(id, SessTxProd))}
}

func (c *Conn) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *Conn) setErr(err error) { c.err.CompareAndSwap(nil, &err) }

// Session returns the connection's session number.
func (c *Conn) Session() int { return c.id }

// wait waits for a notification, the deadline dl (unix ns, 0 none) or
// hostPoll.
func (c *Conn) wait(dl int64) error {
	d := hostPoll
	if dl != 0 {
		left := time.Until(time.Unix(0, dl))
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		d = min(d, left)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.notify:
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
		if err := c.wait(c.rdl.Load()); err != nil {
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
			if err := c.wait(c.wdl.Load()); err != nil {
				return done, err
			}
			continue
		}
		n := min(int(free), len(b)-done)
		at := c.txProd % SessBufBytes
		k := copy(c.tx[at:], b[done:done+n])
		copy(c.tx, b[done+k:done+n])
		if _, err := c.h.submit(context.Background(), Command{Op: OpSend, Session: uint16(c.id), Length: uint32(n)}, false); err != nil {
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
		_, err = c.h.submit(context.Background(), Command{Op: OpClose, Session: uint16(c.id)}, false)
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
	pc := &PacketConn{h: h, port: res.port, ch: make(chan datagram, udpQueue), closed: make(chan struct{})}
	h.mu.Lock()
	h.udp[res.port] = pc
	h.mu.Unlock()
	return pc, nil
}

// udpQueue bounds a PacketConn's received datagrams not yet read.
const udpQueue = 256

type datagram struct {
	b    []byte
	from netip.AddrPort
}

// PacketConn is a bound UDP port of the host path: a net.PacketConn.
type PacketConn struct {
	h       *hostClient
	port    uint16
	ch      chan datagram
	dropped atomic.Uint64
	rdl     atomic.Int64
	once    sync.Once
	closed  chan struct{}
}

func (p *PacketConn) offer(b []byte, from netip.AddrPort) {
	select {
	case p.ch <- datagram{append([]byte(nil), b...), from}:
	default:
		p.dropped.Add(1)
	}
}

// Dropped returns the datagrams dropped for a full queue.
func (p *PacketConn) Dropped() uint64 { return p.dropped.Load() }

// ReadFrom reads the next datagram.
func (p *PacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		var tc <-chan time.Time
		if dl := p.rdl.Load(); dl != 0 {
			left := time.Until(time.Unix(0, dl))
			if left <= 0 {
				return 0, nil, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(left)
			defer t.Stop()
			tc = t.C
		}
		select {
		case d := <-p.ch:
			return copy(b, d.b), net.UDPAddrFromAddrPort(d.from), nil
		case <-p.closed:
			return 0, nil, net.ErrClosed
		case <-tc:
			return 0, nil, os.ErrDeadlineExceeded
		}
	}
}

// WriteTo sends b (at most MaxDatagram bytes) to addr, a *net.UDPAddr, and
// waits for the engine's completion.
func (p *PacketConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, fmt.Errorf("hwoffload: %v is not a *net.UDPAddr", addr)
	}
	ap := ua.AddrPort()
	if !ap.Addr().Unmap().Is4() || len(b) > MaxDatagram {
		return 0, fmt.Errorf("hwoffload: datagram of %d bytes to %v: want IPv4 and at most %d bytes", len(b), ap, MaxDatagram)
	}
	select {
	case <-p.closed:
		return 0, net.ErrClosed
	default:
	}
	h := p.h
	off := <-h.udpSlots
	defer func() { h.udpSlots <- off }()
	r := h.d.r
	base := int(r.Load64(RegUDPTxBase))
	copy(r.Bytes()[base+off:], b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := h.do(ctx, "UDP_SEND", Command{Op: OpUDPSend, Port: p.port, IP: RegFromAddr(ap.Addr().Unmap()),
		DstPort: ap.Port(), Offset: uint32(off), Length: uint32(len(b))})
	return int(res.n), err
}

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
