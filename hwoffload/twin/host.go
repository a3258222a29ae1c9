package twin

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire"
	"github.com/tickwire/tickwire/hwoffload"
	"github.com/tickwire/tickwire/internal/shm"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// The host path: the general TOE and UDP behind the command ring, served by
// a tickwire.Stack on Config.Link. The engine goroutine takes commands and
// checks the host-written registers (CMD_PROD, RX_CONS, UDP_RX_CONS); each
// session has a reader goroutine (connection bytes into its RX buffer) and a
// writer goroutine (SEND bytes out of its TX buffer), each listener an
// accept goroutine, and UDP sockets a handler on the stack's goroutines. They
// all write ring 3 under hostPath.mu.

// Host-path geometry in the region, after the result rings.
const (
	cmdBytes  = hwoffload.CmdSlotBytes << hwoffload.CmdLog2Slots
	sessBytes = hwoffload.Sessions * 2 * hwoffload.SessBufBytes
	hostBytes = cmdBytes + sessBytes + 2*hwoffload.UDPAreaBytes
)

// dialTimeout bounds an OPEN's handshake.
const dialTimeout = 10 * time.Second

// session is one of the 64 sessions.
type session struct {
	id     int
	rx, tx []byte // the session's buffers in the region
	space  chan struct{}
	rxCons atomic.Uint32 // RX_CONS last accepted (engine goroutine stores)
	// regMu orders the stores of the session's read-only registers (regs
	// and the region together) against the engine goroutine's check that
	// the host did not overwrite them.
	regMu    sync.Mutex
	regs     [hwoffload.SessStride / 4]atomic.Uint32 // the registers' values, by offset/4; written under regMu
	mu       sync.Mutex
	cond     *sync.Cond // on mu: sends queued, or closing
	conn     *tickwire.TCPConn
	sends    []pendingSend // guarded by mu
	closing  bool          // guarded by mu: CLOSE issued or RESET
	abort    bool          // guarded by mu: RESET: close without sending what is queued
	closeTag uint32        // guarded by mu: the CLOSE command's tag, when closeCmd
	closeCmd bool          // guarded by mu
	cancel   context.CancelFunc
	done     sync.WaitGroup // the session's goroutines
}

type pendingSend struct {
	tag uint32
	n   uint32
}

// hostPath is the twin's general TOE and UDP.
type hostPath struct {
	e    *engine
	r    *shm.Region
	mem  []byte
	link gstack.LinkEndpoint // Config.Link; closed by closeAll only
	// port is link as the stacks see it: closing a stack does not close
	// it, so that a new stack can be made on it (configuration at RUN).
	port  gstack.LinkEndpoint
	stCfg netConfig       // the values st was made with
	st    *tickwire.Stack // made on the first command that needs it

	cmdBase, sessBase, udpRxBase, udpTxBase int
	cmdProd, cmdCons                        uint32 // engine goroutine only
	udpCons                                 uint32 // UDP_RX_CONS last accepted, engine goroutine only

	lastARP time.Time // engine goroutine only

	mu        sync.Mutex
	ring      *ring                     // ring 3; guarded by mu
	scratch   [hwoffload.SlotBytes]byte // the record rec returns; guarded by mu
	hold      [holdCap]held             // records held back for a full ring 3, a FIFO; guarded by mu
	heldHead  int                       // guarded by mu
	heldN     int                       // guarded by mu
	heldTotal uint64                    // records ever held back (HOST_HELD); guarded by mu
	inflight  int                       // commands taken, completion not yet in ring 3; guarded by mu
	sess      [hwoffload.Sessions]*session
	busy      [hwoffload.Sessions]bool // guarded by mu
	listeners map[uint16]*tickwire.TCPListener
	udp       map[uint16]*tickwire.UDPConn
	udpProd   uint32 // guarded by mu
	udpFree   atomic.Uint32
	refused   uint64 // guarded by mu
	dropped   uint64 // guarded by mu
	wg        sync.WaitGroup
}

func newHostPath(e *engine, link gstack.LinkEndpoint, base int) *hostPath {
	h := &hostPath{e: e, r: e.r, mem: e.mem, link: link, port: keepOpen{link}, ring: &e.rings[hwoffload.RingHost],
		listeners: map[uint16]*tickwire.TCPListener{}, udp: map[uint16]*tickwire.UDPConn{}}
	h.cmdBase = base
	h.sessBase = base + cmdBytes
	h.udpRxBase = h.sessBase + sessBytes
	h.udpTxBase = h.udpRxBase + hwoffload.UDPAreaBytes
	for i := range h.sess {
		off := h.sessBase + i*2*hwoffload.SessBufBytes
		s := &session{id: i, rx: h.mem[off : off+hwoffload.SessBufBytes], space: make(chan struct{}, 1),
			tx: h.mem[off+hwoffload.SessBufBytes : off+2*hwoffload.SessBufBytes]}
		s.cond = sync.NewCond(&s.mu)
		h.sess[i] = s
	}
	h.udpFree.Store(hwoffload.UDPAreaBytes)
	e.set64(hwoffload.RegCmdBase, uint64(h.cmdBase))
	e.set32(hwoffload.RegCmdLog2Slots, hwoffload.CmdLog2Slots)
	e.set32(hwoffload.RegCmdSlotBytes, hwoffload.CmdSlotBytes)
	e.set64(hwoffload.RegSessBase, uint64(h.sessBase))
	e.set32(hwoffload.RegSessions, hwoffload.Sessions)
	e.set32(hwoffload.RegSessBufBytes, hwoffload.SessBufBytes)
	e.set64(hwoffload.RegUDPRxBase, uint64(h.udpRxBase))
	e.set32(hwoffload.RegUDPRxBytes, hwoffload.UDPAreaBytes)
	e.set64(hwoffload.RegUDPTxBase, uint64(h.udpTxBase))
	e.set32(hwoffload.RegUDPTxBytes, hwoffload.UDPAreaBytes)
	return h
}

// setSess stores session s's register reg (a SessionRegisters offset)
// from any goroutine, remembering it for checkSessions.
func (h *hostPath) setSess(s *session, reg int, v uint32) {
	s.regMu.Lock()
	s.regs[reg/4].Store(v)
	h.r.Store32(hwoffload.SessReg(s.id, reg), v)
	s.regMu.Unlock()
}

// reg returns the value the engine last stored in session s's register
// reg (what the host reads, unless it wrote there).
func (s *session) reg(reg int) uint32 { return s.regs[reg/4].Load() }

// sessRO lists the sessions' read-only registers.
var sessRO = func() (ro []int) {
	for _, r := range hwoffload.SessionRegisters {
		if r.Access == hwoffload.RO {
			ro = append(ro, r.Offset)
		}
	}
	return ro
}()

// checkSessions puts back a session register the host wrote that it may
// not (all but RX_CONS) and reports READ_ONLY; engine goroutine.
func (h *hostPath) checkSessions() {
	for _, s := range h.sess {
		for _, reg := range sessRO {
			off := hwoffload.SessReg(s.id, reg)
			if h.r.Load32(off) == s.reg(reg) {
				continue
			}
			s.regMu.Lock() // a store under way is not a host write
			if want := s.reg(reg); h.r.Load32(off) != want {
				h.r.Store32(off, want)
				h.e.fault(hwoffload.CodeReadOnly)
			}
			s.regMu.Unlock()
		}
	}
}

// checkShared puts back the host-path registers that goroutines other
// than the engine's store under h.mu (ring 3's PROD and DROPPED,
// UDP_RX_PROD) when the host wrote them, and reports READ_ONLY; engine
// goroutine.
func (h *hostPath) checkShared() {
	h.mu.Lock()
	bad := false
	for _, w := range [...]struct {
		off int
		v   uint32
	}{
		{hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingProd), h.ring.prod},
		{hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingDropped), h.ring.dropped},
		{hwoffload.RegUDPRxProd, h.udpProd},
	} {
		if h.r.Load32(w.off) != w.v {
			h.r.Store32(w.off, w.v)
			bad = true
		}
	}
	h.mu.Unlock()
	if bad {
		h.e.fault(hwoffload.CodeReadOnly)
	}
}

// Ring 3 records are written through a scratch slot: rec returns it
// cleared, the caller fills the body and calls emit. A record that finds
// ring 3 full is held back, in order, unless it is a RECV (a wake-up: the
// session's RX_PROD says the same), which is dropped and counted; so a
// completion, ACCEPTED, PEER_CLOSED or UDP_RECV is never lost. The queue is
// bounded: the engine takes no command while maxInflight commands are
// taken and their completions not yet written, and a session has at most
// one ACCEPTED and one PEER_CLOSED pending, so holdCap records always fit
// (a host that frees sessions it never saw accepted could overflow it:
// those records are dropped and counted as RECVs are). A datagram is taken
// into the UDP receive area only when its UDP_RECV can be written at once
// (udpRecv), else it is dropped (UDP_RX_DROPPED).
const (
	maxInflight = 1 << hwoffload.CmdLog2Slots
	holdCap     = maxInflight + 2*hwoffload.Sessions
	// recBody is the part of a ring 3 record after the header.
	recBody = 16
)

// held is a ring 3 record waiting for room.
type held struct {
	kind uint16
	flow uint32
	body [recBody]byte
}

// rec returns the scratch record, cleared, for emit. Called with h.mu held.
func (h *hostPath) rec() hwoffload.Slot {
	s := hwoffload.Slot(h.scratch[:])
	s.Clear()
	return s
}

// room reports whether ring 3 has a free slot. Called with h.mu held.
func (h *hostPath) room() bool {
	rg := h.ring
	if rg.prod-rg.cons >= rg.slots {
		h.syncCons()
	}
	return rg.prod-rg.cons < rg.slots
}

// flush writes the held records ring 3 has room for, and reports whether
// none is left. Called with h.mu held.
func (h *hostPath) flush() bool {
	for h.heldN > 0 && h.room() {
		r := &h.hold[h.heldHead]
		h.write(r.kind, r.flow, r.body[:])
		h.heldHead = (h.heldHead + 1) % holdCap
		h.heldN--
	}
	return h.heldN == 0
}

// canPost reports whether a record emitted now goes straight into ring 3.
// Called with h.mu held.
func (h *hostPath) canPost() bool { return h.flush() && h.room() }

// emit writes the scratch record as kind for flow into ring 3, holds it
// back, or drops a RECV (see rec). Called with h.mu held.
func (h *hostPath) emit(kind uint16, flow uint32) {
	body := h.scratch[hwoffload.SlotBody : hwoffload.SlotBody+recBody]
	if h.canPost() {
		h.write(kind, flow, body)
		return
	}
	if kind == hwoffload.KindRecv || h.heldN == holdCap {
		rg := h.ring
		rg.seq++ // used up: the host sees the loss as a jump
		rg.dropped++
		h.r.Store32(hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingDropped), rg.dropped)
		if kind == hwoffload.KindCompletion {
			h.inflight--
		}
		return
	}
	r := &h.hold[(h.heldHead+h.heldN)%holdCap]
	r.kind, r.flow = kind, flow
	copy(r.body[:], body)
	h.heldN++
	h.heldTotal++
}

// write puts a record into ring 3's next slot, which is free, and
// publishes it. Called with h.mu held.
func (h *hostPath) write(kind uint16, flow uint32, body []byte) {
	rg := h.ring
	off := rg.base + int(rg.prod&(rg.slots-1))*hwoffload.SlotBytes
	s := hwoffload.Slot(h.mem[off : off+hwoffload.SlotBytes])
	s.Clear()
	c := h.e.cycles()
	s.PutHeader(kind, flow, rg.seq, c, c)
	copy(s[hwoffload.SlotBody:], body)
	rg.seq++
	rg.prod++
	h.r.Store32(hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingProd), rg.prod)
	if kind == hwoffload.KindCompletion {
		h.inflight--
	}
}

// syncCons takes ring 3's CONS; called with h.mu held. A bad value is left
// for the engine goroutine's check, which reports it.
func (h *hostPath) syncCons() {
	rg := h.ring
	c := h.r.Load32(hwoffload.RingReg(hwoffload.RingHost, hwoffload.RingCons))
	if c != rg.cons && c-rg.cons <= rg.prod-rg.cons {
		rg.cons = c
	}
}

func (h *hostPath) complete(tag uint32, op uint16, session uint32, st hwoffload.HostStatus, port uint16, n uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rec().PutCompletion(tag, op, st, port, n)
	h.emit(hwoffload.KindCompletion, session)
}

// poll checks the host-path registers and runs the new commands; engine
// goroutine.
func (h *hostPath) poll() {
	e := h.e
	// Ring 3's CONS, under mu since other goroutines write ring 3.
	h.mu.Lock()
	e.syncCons(hwoffload.RingHost)
	h.flush()
	h.mu.Unlock()
	h.checkShared()
	h.checkSessions()

	for i, s := range h.sess {
		off := hwoffload.SessReg(i, hwoffload.SessRxCons)
		c := h.r.Load32(off)
		old := s.rxCons.Load()
		if c == old {
			continue
		}
		prod := s.reg(hwoffload.SessRxProd)
		if c-old > prod-old {
			h.r.CompareAndSwap32(off, c, old)
			e.fault(hwoffload.CodeConsAhead)
			continue
		}
		s.rxCons.Store(c)
		select {
		case s.space <- struct{}{}:
		default:
		}
	}
	if c := h.r.Load32(hwoffload.RegUDPRxCons); c != h.udpCons {
		h.mu.Lock()
		prod := h.udpProd
		ok := c-h.udpCons <= prod-h.udpCons
		if ok {
			h.udpCons = c
			h.udpFree.Store(hwoffload.UDPAreaBytes - (prod - c))
		}
		h.mu.Unlock()
		if !ok {
			h.r.CompareAndSwap32(hwoffload.RegUDPRxCons, c, h.udpCons)
			e.fault(hwoffload.CodeConsAhead)
		}
	}

	p := h.r.Load32(hwoffload.RegCmdProd)
	if p != h.cmdProd {
		if p-h.cmdCons > 1<<hwoffload.CmdLog2Slots || p-h.cmdCons < h.cmdProd-h.cmdCons {
			h.r.CompareAndSwap32(hwoffload.RegCmdProd, p, h.cmdProd)
			e.fault(hwoffload.CodeBadCommand)
		} else {
			h.cmdProd = p
		}
	}
	if e.running {
		for h.cmdCons != h.cmdProd && h.take() {
			off := h.cmdBase + int(h.cmdCons&(1<<hwoffload.CmdLog2Slots-1))*hwoffload.CmdSlotBytes
			var c [hwoffload.CmdSlotBytes]byte
			copy(c[:], h.mem[off:off+hwoffload.CmdSlotBytes])
			h.cmdCons++
			e.set32(hwoffload.RegCmdCons, h.cmdCons)
			h.command(hwoffload.CmdSlot(c[:]).Get())
		}
	}
	if h.st != nil && time.Since(h.lastARP) >= 10*time.Millisecond {
		h.lastARP = time.Now()
		h.publishARP()
	}
	h.mu.Lock()
	refused, dropped, heldTotal := h.refused, h.dropped, h.heldTotal
	h.mu.Unlock()
	if heldTotal != e.shadow64(hwoffload.RegHostHeld) {
		e.set64(hwoffload.RegHostHeld, heldTotal)
	}
	// Stored when they change only: a host write in between is left for
	// the next look at the read-only registers, which reports it.
	if refused != e.shadow64(hwoffload.RegHostRefused) {
		e.set64(hwoffload.RegHostRefused, refused)
	}
	if dropped != e.shadow64(hwoffload.RegUDPRxDropped) {
		e.set64(hwoffload.RegUDPRxDropped, dropped)
	}
}

// take counts a command taken off the command ring, or reports false when
// maxInflight are in flight (the command stays on the ring).
func (h *hostPath) take() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight >= maxInflight {
		return false
	}
	h.inflight++
	return true
}

// publishARP copies the stack's ARP table into the window.
func (h *hostPath) publishARP() {
	n := 0
	for _, a := range h.st.ARPTable() {
		if n == hwoffload.MaxARPEntries {
			break
		}
		b := a.Addr.As4()
		var hi, lo, flags uint32
		if len(a.MAC) == 6 {
			hi = uint32(a.MAC[0])<<8 | uint32(a.MAC[1])
			lo = binary.BigEndian.Uint32(a.MAC[2:])
		}
		if a.Resolved {
			flags = hwoffload.ARPResolved
		}
		h.e.set32(hwoffload.ARPReg(n, hwoffload.ARPAddr), binary.BigEndian.Uint32(b[:]))
		h.e.set32(hwoffload.ARPReg(n, hwoffload.ARPMACHi), hi)
		h.e.set32(hwoffload.ARPReg(n, hwoffload.ARPMACLo), lo)
		h.e.set32(hwoffload.ARPReg(n, hwoffload.ARPFlags), flags)
		n++
	}
	h.e.set32(hwoffload.RegARPCount, uint32(n))
}

// keepOpen is the network port handed to a stack: its Close does nothing,
// so that the port outlives the stack (closeAll closes the port itself).
type keepOpen struct{ gstack.LinkEndpoint }

func (keepOpen) Close() {}

// netConfig is the network configuration a stack is made with: IP_ADDR,
// NETMASK, GATEWAY, MAC_HI, MAC_LO.
type netConfig [5]uint32

// netConfig returns the configuration registers' accepted values.
func (h *hostPath) netConfig() netConfig {
	sh := &h.e.shadow
	return netConfig{sh[hwoffload.RegIPAddr/4], sh[hwoffload.RegNetmask/4], sh[hwoffload.RegGateway/4],
		sh[hwoffload.RegMACHi/4], sh[hwoffload.RegMACLo/4]}
}

// run is called by the engine goroutine as it starts RUNNING: the network
// configuration is taken at RUN. When it differs from the one the stack
// runs with, the stack is replaced by one made with the new values: its
// connections are reset (each session's reader reports PEER_CLOSED with
// reset 1, an OPEN under way completes REFUSED; the host CLOSEs the
// sessions), and the listeners and UDP ports are opened again, on the
// same ports, on the new stack. Without an address (IP_ADDR 0) or with
// values the stack refuses, they are closed and their bits cleared.
func (h *hostPath) run() {
	if h.st == nil || h.netConfig() == h.stCfg {
		return
	}
	old := h.st
	h.st = nil
	h.mu.Lock()
	lns, us := h.listeners, h.udp
	h.listeners, h.udp = map[uint16]*tickwire.TCPListener{}, map[uint16]*tickwire.UDPConn{}
	h.mu.Unlock()
	old.Close() // resets the connections, closes the listeners and sockets
	st, code := h.stack()
	for port := range lns {
		if code == hwoffload.StatusOK {
			if ln, err := st.ListenTCP(port); err == nil {
				h.serve(ln, port)
				continue
			}
		}
		h.bit(hwoffload.RegListenPorts, port, false)
	}
	for port := range us {
		if code == hwoffload.StatusOK {
			if _, err := h.bindUDP(st, port); err == nil {
				continue
			}
		}
		h.bit(hwoffload.RegUDPPorts, port, false)
	}
}

// stack returns the host path's stack, making it on first use from the
// configuration registers.
func (h *hostPath) stack() (*tickwire.Stack, hwoffload.HostStatus) {
	if h.st != nil {
		return h.st, hwoffload.StatusOK
	}
	if h.link == nil {
		return nil, hwoffload.StatusNoHostPath
	}
	e := h.e
	ip := e.shadow[hwoffload.RegIPAddr/4]
	if ip == 0 {
		e.fault(hwoffload.CodeNoIPAddr)
		return nil, hwoffload.StatusNoIPAddr
	}
	mask := e.shadow[hwoffload.RegNetmask/4]
	bits := 0
	for m := mask; m != 0; m <<= 1 {
		bits++
	}
	cfg := tickwire.Config{Link: h.port, Addr: netip.PrefixFrom(hwoffload.AddrFromReg(ip), bits)}
	if gw := e.shadow[hwoffload.RegGateway/4]; gw != 0 {
		cfg.Gateway = hwoffload.AddrFromReg(gw)
	}
	hi, lo := e.shadow[hwoffload.RegMACHi/4], e.shadow[hwoffload.RegMACLo/4]
	if hi != 0 || lo != 0 {
		cfg.MAC = net.HardwareAddr{byte(hi >> 8), byte(hi), byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)}
	}
	st, err := tickwire.New(cfg)
	if err != nil {
		e.fault(hwoffload.CodeBadValue)
		return nil, hwoffload.StatusNetwork
	}
	h.st, h.stCfg = st, h.netConfig()
	return st, hwoffload.StatusOK
}

// bit sets or clears port p's bit in the bitmap at off; engine goroutine.
func (h *hostPath) bit(off int, p uint16, on bool) {
	w := off + int(p/32)*4
	m := uint32(1) << (p % 32)
	v := h.e.shadow[w/4] &^ m
	if on {
		v |= m
	}
	h.e.set32(w, v)
}

// command runs one command; engine goroutine.
func (h *hostPath) command(c hwoffload.Command) {
	bad := func() {
		h.e.fault(hwoffload.CodeBadCommand)
		h.complete(c.Tag, c.Op, uint32(c.Session), hwoffload.StatusBadCommand, 0, 0)
	}
	switch c.Op {
	case hwoffload.OpListen, hwoffload.OpOpen, hwoffload.OpUDPBind, hwoffload.OpUDPSend:
	case hwoffload.OpClose, hwoffload.OpSend, hwoffload.OpUnlisten, hwoffload.OpUDPUnbind:
	default:
		bad()
		return
	}
	if (c.Op == hwoffload.OpOpen || c.Op == hwoffload.OpClose || c.Op == hwoffload.OpSend) && int(c.Session) >= hwoffload.Sessions {
		bad()
		return
	}
	if c.Op == hwoffload.OpUDPSend && (c.Length > hwoffload.MaxDatagram || c.Offset > hwoffload.UDPAreaBytes-c.Length) {
		bad()
		return
	}
	st, code := h.stack()
	if code != hwoffload.StatusOK {
		h.complete(c.Tag, c.Op, uint32(c.Session), code, 0, 0)
		return
	}
	switch c.Op {
	case hwoffload.OpListen:
		h.listen(st, c)
	case hwoffload.OpUnlisten:
		unbind(h, h.listeners, hwoffload.RegListenPorts, c)
	case hwoffload.OpOpen:
		h.open(st, c)
	case hwoffload.OpClose:
		h.close(c)
	case hwoffload.OpSend:
		h.send(c)
	case hwoffload.OpUDPBind:
		h.udpBind(st, c)
	case hwoffload.OpUDPUnbind:
		unbind(h, h.udp, hwoffload.RegUDPPorts, c)
	case hwoffload.OpUDPSend:
		h.mu.Lock()
		u := h.udp[c.Port]
		h.mu.Unlock()
		if u == nil {
			h.complete(c.Tag, c.Op, ^uint32(0), hwoffload.StatusNotOpen, c.Port, 0)
			return
		}
		b := h.mem[h.udpTxBase+int(c.Offset) : h.udpTxBase+int(c.Offset+c.Length)]
		n, err := u.WriteToUDPAddrPort(b, netip.AddrPortFrom(hwoffload.AddrFromReg(c.IP), c.DstPort))
		status := hwoffload.StatusOK
		if err != nil {
			status = hwoffload.StatusNetwork
		}
		h.complete(c.Tag, c.Op, ^uint32(0), status, c.Port, uint32(n))
	}
}

// unbind runs UNLISTEN or UDP_UNBIND: the port's listener or socket in m
// is closed and its bit in the bitmap at bitmap cleared.
func unbind[T io.Closer](h *hostPath, m map[uint16]T, bitmap int, c hwoffload.Command) {
	h.mu.Lock()
	v, ok := m[c.Port]
	delete(m, c.Port)
	h.mu.Unlock()
	if !ok {
		h.complete(c.Tag, c.Op, ^uint32(0), hwoffload.StatusNotOpen, c.Port, 0)
		return
	}
	v.Close()
	h.bit(bitmap, c.Port, false)
	h.complete(c.Tag, c.Op, ^uint32(0), hwoffload.StatusOK, c.Port, 0)
}

// inUse completes c with IN_USE when its port is in m already.
func inUse[T any](h *hostPath, m map[uint16]T, c hwoffload.Command) bool {
	h.mu.Lock()
	_, dup := m[c.Port]
	h.mu.Unlock()
	if dup && c.Port != 0 {
		h.complete(c.Tag, c.Op, ^uint32(0), hwoffload.StatusInUse, c.Port, 0)
	}
	return dup && c.Port != 0
}

func (h *hostPath) listen(st *tickwire.Stack, c hwoffload.Command) {
	if inUse(h, h.listeners, c) {
		return
	}
	ln, err := st.ListenTCP(c.Port)
	if err != nil {
		h.complete(c.Tag, c.Op, ^uint32(0), hwoffload.StatusInUse, c.Port, 0)
		return
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	h.serve(ln, port)
	h.bit(hwoffload.RegListenPorts, port, true)
	h.complete(c.Tag, c.Op, ^uint32(0), hwoffload.StatusOK, port, 0)
}

// serve records listener ln of port and accepts its connections into free
// sessions.
func (h *hostPath) serve(ln *tickwire.TCPListener, port uint16) {
	h.mu.Lock()
	h.listeners[port] = ln
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			tc := conn.(*tickwire.TCPConn)
			h.mu.Lock()
			id := slices.Index(h.busy[:], false)
			if id < 0 {
				h.refused++
				h.mu.Unlock()
				tc.Close()
				continue
			}
			h.busy[id] = true
			s := h.sess[id]
			h.establish(s, tc, hwoffload.SessEstablished)
			rp := tc.RemoteAddr().(*net.TCPAddr).AddrPort()
			h.rec().PutAccepted(port, rp.Port(), hwoffload.RegFromAddr(rp.Addr()))
			h.emit(hwoffload.KindAccepted, uint32(id))
			h.mu.Unlock()
			h.start(s)
		}
	}()
}

// establish fills session s's registers for conn; called with h.mu held.
func (h *hostPath) establish(s *session, conn *tickwire.TCPConn, state uint32) {
	s.mu.Lock()
	s.conn, s.closing, s.abort, s.closeCmd, s.sends = conn, false, false, false, s.sends[:0]
	s.mu.Unlock()
	lp := conn.LocalAddr().(*net.TCPAddr).AddrPort()
	rp := conn.RemoteAddr().(*net.TCPAddr).AddrPort()
	h.setSess(s, hwoffload.SessLocalPort, uint32(lp.Port()))
	h.setSess(s, hwoffload.SessRemoteIP, hwoffload.RegFromAddr(rp.Addr()))
	h.setSess(s, hwoffload.SessRemotePort, uint32(rp.Port()))
	h.setSess(s, hwoffload.SessState, state)
}

// start runs session s's reader and writer, and frees it when both are
// done and it was closed.
func (h *hostPath) start(s *session) {
	s.done.Add(2)
	h.wg.Add(1)
	go h.reader(s)
	go h.writer(s)
	go func() {
		defer h.wg.Done()
		s.done.Wait()
		s.conn.Close()
		s.mu.Lock()
		tag, cmd := s.closeTag, s.closeCmd
		s.mu.Unlock()
		h.free(s)
		if cmd {
			h.complete(tag, hwoffload.OpClose, uint32(s.id), hwoffload.StatusOK, 0, 0)
		}
	}()
}

// free clears session s's registers and marks it free.
func (h *hostPath) free(s *session) {
	for _, reg := range hwoffload.SessionRegisters {
		h.setSess(s, reg.Offset, 0)
	}
	s.rxCons.Store(0)
	h.mu.Lock()
	h.busy[s.id] = false
	h.mu.Unlock()
}

// reader copies the connection's bytes into the RX buffer.
func (h *hostPath) reader(s *session) {
	defer s.done.Done()
	var prod uint32
	for {
		free := hwoffload.SessBufBytes - (prod - s.rxCons.Load())
		if free == 0 {
			select {
			case <-s.space:
			case <-time.After(time.Millisecond):
			}
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return
			}
			continue
		}
		at := prod % hwoffload.SessBufBytes
		n, err := s.conn.Read(s.rx[at:min(at+free, hwoffload.SessBufBytes)])
		if n > 0 {
			prod += uint32(n)
			h.setSess(s, hwoffload.SessRxProd, prod)
			h.mu.Lock()
			h.rec().PutRecv(prod, uint32(n))
			h.emit(hwoffload.KindRecv, uint32(s.id))
			h.mu.Unlock()
		}
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if !closing {
				var reset uint8
				if !errors.Is(err, io.EOF) {
					reset = 1
				}
				h.setSess(s, hwoffload.SessState, hwoffload.SessPeerClosed)
				h.mu.Lock()
				h.rec()[hwoffload.PeerClosedReset] = reset
				h.emit(hwoffload.KindPeerClosed, uint32(s.id))
				h.mu.Unlock()
			}
			return
		}
	}
}

// writer sends the bytes SEND commands handed over.
func (h *hostPath) writer(s *session) {
	defer s.done.Done()
	var cons uint32
	for {
		s.mu.Lock()
		for len(s.sends) == 0 && !s.closing {
			s.cond.Wait()
		}
		if s.abort || s.closing && len(s.sends) == 0 {
			// CLOSE: every byte SENT before it is out; the FIN follows.
			// RESET: at once.
			conn := s.conn
			s.mu.Unlock()
			conn.Close()
			return
		}
		p := s.sends[0]
		s.sends = s.sends[1:]
		conn := s.conn
		s.mu.Unlock()
		status := hwoffload.StatusOK
		left := p.n
		for left > 0 {
			at := cons % hwoffload.SessBufBytes
			end := min(at+left, hwoffload.SessBufBytes)
			n, err := conn.Write(s.tx[at:end])
			cons += uint32(n)
			left -= uint32(n)
			h.setSess(s, hwoffload.SessTxCons, cons)
			if err != nil {
				status = hwoffload.StatusNetwork
				break
			}
		}
		h.complete(p.tag, hwoffload.OpSend, uint32(s.id), status, 0, p.n-left)
		if status != hwoffload.StatusOK {
			s.mu.Lock()
			for !s.closing {
				s.cond.Wait()
			}
			s.mu.Unlock()
			conn.Close()
			return
		}
	}
}

func (h *hostPath) open(st *tickwire.Stack, c hwoffload.Command) {
	h.mu.Lock()
	if h.busy[c.Session] {
		h.mu.Unlock()
		h.complete(c.Tag, c.Op, uint32(c.Session), hwoffload.StatusInUse, 0, 0)
		return
	}
	h.busy[c.Session] = true
	h.mu.Unlock()
	s := h.sess[c.Session]
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	s.mu.Lock()
	s.cancel, s.closing, s.abort, s.closeCmd, s.conn = cancel, false, false, false, nil
	s.mu.Unlock()
	h.setSess(s, hwoffload.SessRemoteIP, c.IP)
	h.setSess(s, hwoffload.SessRemotePort, uint32(c.Port))
	h.setSess(s, hwoffload.SessState, hwoffload.SessOpening)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		conn, err := st.DialTCP(ctx, netip.AddrPortFrom(hwoffload.AddrFromReg(c.IP), c.Port))
		cancel()
		s.mu.Lock()
		closing, tag, cmd := s.closing, s.closeTag, s.closeCmd
		s.mu.Unlock()
		if err != nil || closing {
			if conn != nil {
				conn.Close()
			}
			h.free(s)
			h.complete(c.Tag, c.Op, uint32(s.id), hwoffload.StatusRefused, 0, 0)
			if cmd {
				h.complete(tag, hwoffload.OpClose, uint32(s.id), hwoffload.StatusOK, 0, 0)
			}
			return
		}
		h.mu.Lock()
		h.establish(s, conn, hwoffload.SessEstablished)
		h.mu.Unlock()
		lp := conn.LocalAddr().(*net.TCPAddr).AddrPort().Port()
		h.complete(c.Tag, c.Op, uint32(s.id), hwoffload.StatusOK, lp, 0)
		h.start(s)
	}()
}

func (h *hostPath) close(c hwoffload.Command) {
	s := h.sess[c.Session]
	h.mu.Lock()
	busy := h.busy[c.Session]
	h.mu.Unlock()
	s.mu.Lock()
	if !busy || s.closing {
		s.mu.Unlock()
		h.complete(c.Tag, c.Op, uint32(c.Session), hwoffload.StatusNotOpen, 0, 0)
		return
	}
	s.closing, s.closeCmd, s.closeTag = true, true, c.Tag
	cancel := s.cancel
	s.cond.Broadcast()
	s.mu.Unlock()
	h.setSess(s, hwoffload.SessState, hwoffload.SessClosing)
	if cancel != nil {
		cancel()
	}
	// The writer sends what SEND queued, then closes the connection; the
	// reader then returns, and start's goroutine completes the CLOSE.
}

func (h *hostPath) send(c hwoffload.Command) {
	s := h.sess[c.Session]
	s.mu.Lock()
	ok := s.conn != nil && !s.closing
	s.mu.Unlock()
	state := s.reg(hwoffload.SessState)
	if !ok || (state != hwoffload.SessEstablished && state != hwoffload.SessPeerClosed) {
		h.complete(c.Tag, c.Op, uint32(c.Session), hwoffload.StatusNotOpen, 0, 0)
		return
	}
	prod := s.reg(hwoffload.SessTxProd)
	cons := s.reg(hwoffload.SessTxCons)
	if c.Length == 0 || c.Length > hwoffload.SessBufBytes-(prod-cons) {
		h.e.fault(hwoffload.CodeBadCommand)
		h.complete(c.Tag, c.Op, uint32(c.Session), hwoffload.StatusBadCommand, 0, 0)
		return
	}
	h.setSess(s, hwoffload.SessTxProd, prod+c.Length)
	s.mu.Lock()
	s.sends = append(s.sends, pendingSend{tag: c.Tag, n: c.Length})
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (h *hostPath) udpBind(st *tickwire.Stack, c hwoffload.Command) {
	if inUse(h, h.udp, c) {
		return
	}
	port, err := h.bindUDP(st, c.Port)
	if err != nil {
		h.complete(c.Tag, c.Op, ^uint32(0), hwoffload.StatusInUse, c.Port, 0)
		return
	}
	h.bit(hwoffload.RegUDPPorts, port, true)
	h.complete(c.Tag, c.Op, ^uint32(0), hwoffload.StatusOK, port, 0)
}

// bindUDP opens UDP port p (0: the stack picks one) on st, its datagrams
// into the receive area, and records it.
func (h *hostPath) bindUDP(st *tickwire.Stack, p uint16) (uint16, error) {
	var bound atomic.Uint32 // the port, once known: a datagram may come first
	bound.Store(uint32(p))
	u, err := st.ServeUDP(p, func(_ *tickwire.UDPConn, payload []byte, from netip.AddrPort) {
		h.udpRecv(uint16(bound.Load()), payload, from)
	})
	if err != nil {
		return 0, err
	}
	port := uint16(u.LocalAddr().(*net.UDPAddr).Port)
	bound.Store(uint32(port))
	h.mu.Lock()
	h.udp[port] = u
	h.mu.Unlock()
	return port, nil
}

// udpRecv puts a datagram into the UDP receive area: a datagram never wraps
// (it starts at the area's beginning when it does not fit before its end),
// and is dropped when the host has not freed enough room.
func (h *hostPath) udpRecv(port uint16, b []byte, from netip.AddrPort) {
	if len(b) > hwoffload.MaxDatagram {
		b = b[:hwoffload.MaxDatagram]
	}
	n := uint32(len(b))
	h.mu.Lock()
	defer h.mu.Unlock()
	pos := h.udpProd
	at := pos % hwoffload.UDPAreaBytes
	skip := uint32(0)
	if at+n > hwoffload.UDPAreaBytes {
		skip = hwoffload.UDPAreaBytes - at
	}
	if skip+n > h.udpFree.Load() || !h.canPost() {
		h.dropped++ // the area, or ring 3 for its UDP_RECV, has no room
		return
	}
	pos += skip
	at = pos % hwoffload.UDPAreaBytes
	copy(h.mem[h.udpRxBase+int(at):], b)
	h.udpProd = pos + n
	h.udpFree.Add(^(skip + n - 1))
	h.r.Store32(hwoffload.RegUDPRxProd, h.udpProd)
	h.rec().PutUDPRecv(port, from.Port(), hwoffload.RegFromAddr(from.Addr()), pos, n)
	h.emit(hwoffload.KindUDPRecv, ^uint32(0))
}

// reset closes every session, listener and UDP socket, waits for their
// goroutines and clears the host-path registers; engine goroutine.
func (h *hostPath) reset() {
	h.shutdown()
	for i := range h.sess {
		h.free(h.sess[i])
	}
	for off := hwoffload.RegUDPPorts; off < hwoffload.RegListenPorts+hwoffload.PortBitmapSize; off += 4 {
		h.e.set32(off, 0)
	}
	h.mu.Lock()
	h.udpProd, h.dropped, h.refused = 0, 0, 0
	h.heldHead, h.heldN, h.heldTotal, h.inflight = 0, 0, 0, 0
	h.mu.Unlock()
	h.udpCons = 0
	h.udpFree.Store(hwoffload.UDPAreaBytes)
	h.cmdProd, h.cmdCons = 0, 0
	for _, off := range []int{hwoffload.RegCmdProd, hwoffload.RegUDPRxProd, hwoffload.RegUDPRxCons} {
		h.r.Store32(off, 0)
	}
	h.e.set32(hwoffload.RegCmdCons, 0)
	h.e.set64(hwoffload.RegUDPRxDropped, 0)
	h.e.set64(hwoffload.RegHostRefused, 0)
	h.e.set64(hwoffload.RegHostHeld, 0)
}

// shutdown closes every session, listener and socket and waits for their
// goroutines.
func (h *hostPath) shutdown() {
	h.mu.Lock()
	lns, us := h.listeners, h.udp
	h.listeners, h.udp = map[uint16]*tickwire.TCPListener{}, map[uint16]*tickwire.UDPConn{}
	h.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	for _, u := range us {
		u.Close()
	}
	for _, s := range h.sess {
		s.mu.Lock()
		s.closing, s.abort, s.closeCmd = true, true, false
		conn, cancel := s.conn, s.cancel
		s.cond.Broadcast()
		s.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		if conn != nil {
			conn.Close()
		}
	}
	h.wg.Wait()
}

// closeAll ends the host path, its stack and the network port.
func (h *hostPath) closeAll() {
	h.shutdown()
	if h.st != nil {
		h.st.Close()
	}
	if h.link != nil {
		h.link.Close()
	}
}
