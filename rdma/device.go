package rdma

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/tickwire/tickwire"
)

// Device is the RoCEv2 transport on one tickwire.Stack: a UDP socket on
// port 4791 whose receive handler demultiplexes packets to queue pairs by
// their BTH destination QP, plus the stack's memory regions. Packets are
// handled on the goroutine that delivers the datagram (tickwire's
// UDPConn.OnReceive): a WRITE lands in memory and its ACK leaves before
// the delivery returns.
//
// All methods are safe for concurrent use.
//
// Lock order:
//
//	QP.mu
//	  Device.mu
//	  CQ.mu
type Device struct {
	s     *tickwire.Stack
	conn  *tickwire.UDPConn
	local netip.AddrPort
	mtu   int // the stack's IPv4 MTU

	mu sync.RWMutex
	// +checklocks:mu
	qps map[uint32]*QP
	// +checklocks:mu
	mrs map[uint32]*MR
	// +checklocks:mu
	nextQPN uint32
	// +checklocks:mu
	nextKey uint32
	// +checklocks:mu
	nextAddr uint64
	// +checklocks:mu
	closed bool

	txq  chan *QP      // queue pairs with packets left to send (kick)
	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	st counters
	// rxHdr is handle's scratch: the socket calls its handler one
	// datagram at a time.
	rxHdr [icrcScratch]byte
}

// MaxQPs bounds the queue pairs of a Device.
const MaxQPs = 256

// Errors of Device methods.
var (
	ErrClosed     = errors.New("rdma: device closed")
	ErrTooManyQPs = errors.New("rdma: too many queue pairs")
)

// Open starts RoCEv2 on s: it serves UDP port 4791 (UDPPort) on the
// stack's address. The stack's MTU bounds the path MTU its queue pairs
// can use (see QPAttrs.PathMTU).
func Open(s *tickwire.Stack) (*Device, error) {
	d := &Device{
		s:        s,
		local:    netip.AddrPortFrom(s.Addr(), UDPPort),
		mtu:      s.Config().MTU,
		qps:      make(map[uint32]*QP),
		mrs:      make(map[uint32]*MR),
		nextQPN:  0x11,
		nextKey:  0x1000,
		nextAddr: mrAddrBase,
	}
	if d.mtu == 0 {
		d.mtu = tickwire.DefaultMTU
	}
	c, err := s.ServeUDP(UDPPort, d.handle)
	if err != nil {
		return nil, fmt.Errorf("rdma: %w", err)
	}
	d.conn = c
	d.txq = make(chan *QP, MaxQPs)
	d.done = make(chan struct{})
	d.wg.Add(1)
	go d.sender()
	return d, nil
}

// kick queues q for the device's goroutine to pump, unless it is queued.
// The queue holds each queue pair at most once: it never fills.
func (d *Device) kick(q *QP) {
	if q.kicked.Swap(true) {
		return
	}
	select {
	case d.txq <- q:
	default:
		q.kicked.Store(false) // cannot happen: MaxQPs slots
	}
}

// sender pumps the queue pairs kicked, in turn, until Close.
func (d *Device) sender() {
	defer d.wg.Done()
	for {
		select {
		case q := <-d.txq:
			q.kicked.Store(false)
			q.pump()
		case <-d.done:
			return
		}
	}
}

// Close moves every queue pair to ERROR (flushing their work requests),
// deregisters everything and closes the socket.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	qps := make([]*QP, 0, len(d.qps))
	for _, q := range d.qps {
		qps = append(qps, q)
	}
	d.mu.Unlock()
	for _, q := range qps {
		q.Destroy()
	}
	close(d.done)
	d.wg.Wait()
	return d.conn.Close()
}

// RegisterMR registers buf (which the Device does NOT take ownership of,
// but writes into as access allows, until DeregisterMR) as a memory region
// and returns it. At most MaxMRs regions, each below 2 GiB.
func (d *Device) RegisterMR(buf []byte, access Access) (*MR, error) {
	if uint64(len(buf)) > MaxMessage {
		return nil, ErrMRTooLarge
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	if len(d.mrs) >= MaxMRs {
		return nil, ErrTooManyMRs
	}
	m := &MR{buf: buf, addr: d.nextAddr, key: d.nextKey, access: access}
	d.nextKey++
	d.nextAddr += (uint64(len(buf))+4095)&^4095 + 4096
	d.mrs[m.key] = m
	return m, nil
}

// DeregisterMR removes m: from then on a remote access naming its rkey is
// NAKed.
func (d *Device) DeregisterMR(m *MR) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mrs[m.key] == m {
		delete(d.mrs, m.key)
	}
}

func (d *Device) mr(key uint32) *MR {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.mrs[key]
}

func (d *Device) qp(qpn uint32) *QP {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.qps[qpn]
}

// handle is the UDP receive handler: one RoCEv2 packet per datagram.
func (d *Device) handle(c *tickwire.UDPConn, b []byte, from netip.AddrPort) {
	d.st.RxPackets.Add(1)
	var p Packet
	if err := Parse(b, &p); err != nil {
		d.st.Malformed.Add(1)
		return
	}
	id, flags := uint16(assumedIPID), uint16(assumedIPFlags)
	if c != nil { // nil: a test's packet, not the stack's
		if i, f, ok := c.RxIPv4ID(); ok {
			id, flags = i, f
		}
	}
	if icrcForIP(&d.rxHdr, from, d.local, id, flags, b[:len(b)-ICRCSize]) != p.ICRC {
		d.st.BadICRC.Add(1)
		return
	}
	q := d.qp(p.BTH.DestQP())
	if q == nil {
		d.st.UnknownQP.Add(1)
		return
	}
	q.receive(&p, from.Addr())
}

// Stats returns the Device's counters.
func (d *Device) Stats() Stats { return d.st.snapshot() }
