package dmaring

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/tickwire/tickwire/link"
	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultQueues  = 1
	DefaultRingLog = 9 // 512 descriptors per ring
	DefaultBufSize = 2048
	DefaultMTU     = 1500
)

// Config configures New. The zero value is usable: one queue pair in a
// memfd.
type Config struct {
	// Queues is the number of queue pairs (TX and RX ring, their completion
	// queues, one event queue), 1 to MaxQueues. Default 1.
	Queues int
	// RingLog is log2 of the descriptors per ring, 1 to 12; each RX and TX
	// descriptor has its own buffer. Default 9.
	RingLog int
	// BufSize is the bytes of one buffer, a multiple of 64 from MinBufSize
	// to MaxBufSize, at least MTU + 14. Default 2048.
	BufSize int
	// MTU is the largest IPv4 packet, excluding the Ethernet header.
	// Default 1500.
	MTU uint32
	// MAC is the endpoint's Ethernet address; nil means a random locally
	// administered unicast address.
	MAC net.HardwareAddr
	// Path, when not "", creates the region as a new file there (normally
	// under /dev/shm) instead of a memfd; Close removes it. Linux only.
	Path string
	// InMemory puts the region in Go memory instead of a file: the device
	// must then run in this process. Works on every system.
	InMemory bool
	// Shared is for a device in another process (examples/nicsim -region
	// PATH): the region is the file at Path (required), and the wake-ups
	// are futex words in its header (RegionWakeups), which the device
	// takes from its own mapping, instead of eventfds only this process
	// can use. A queue's reader then sleeps in futex(2), holding its
	// thread. Linux only.
	Shared bool
	// TxStamps keeps, for every frame the device completes, when it left
	// and what it was, for Endpoint.TxStamps. Off by default: each TX
	// completion then costs a read of the frame's headers more.
	TxStamps bool
}

// Endpoint is the host side of a region: a stack.LinkEndpoint for
// tickwire.New, and while no stack is attached, its RxQueues are
// frame.Sources. See the package doc for the goroutines that run it.
//
// All methods are safe for concurrent use unless their doc says otherwise.
//
// Lock order:
//
//	runMu
//	  txQueue.mu
type Endpoint struct {
	linkbase.Endpoint

	region *Region
	layout Layout
	wake   *Wakeups
	mac    net.HardwareAddr
	rx     []*RxQueue
	tx     []*txQueue

	runMu sync.Mutex
	// +checklocks:runMu
	running bool // the stack's RX goroutines run
	// +checklocks:runMu
	closing bool // Close began
	// +checklocks:runMu
	closed   bool // the region is unmapped
	wg       sync.WaitGroup
	stopping atomic.Bool
	busyPoll atomic.Int64  // nanoseconds
	txStamps bool          // Config.TxStamps
	stampQ   atomic.Uint32 // the queue TxStamps starts at, rotated
}

var (
	_ stack.LinkEndpoint       = (*Endpoint)(nil)
	_ frame.Source             = (*RxQueue)(nil)
	_ link.BusyPoller          = (*Endpoint)(nil)
	_ link.ChecksumDropCounter = (*Endpoint)(nil)
)

// New creates a region (a memfd, a file at Config.Path, or Go memory), lays
// out and programs every queue, stocks the RX rings and enables them. A
// device (nicsim) then maps the region and serves it.
func New(cfg Config) (*Endpoint, error) {
	if cfg.Queues == 0 {
		cfg.Queues = DefaultQueues
	}
	if cfg.RingLog == 0 {
		cfg.RingLog = DefaultRingLog
	}
	if cfg.BufSize == 0 {
		cfg.BufSize = DefaultBufSize
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.MTU < 68 || int(cfg.MTU)+linkbase.HeaderLength > cfg.BufSize {
		return nil, fmt.Errorf("dmaring: MTU %d: must be at least 68 and fit a buffer of %d bytes with the Ethernet header", cfg.MTU, cfg.BufSize)
	}
	if cfg.MAC != nil && (len(cfg.MAC) != 6 || cfg.MAC[0]&1 != 0) {
		return nil, errors.New("dmaring: MAC must be a 6-byte unicast Ethernet address")
	}
	l, err := NewLayout(cfg.Queues, cfg.RingLog, cfg.BufSize)
	if err != nil {
		return nil, err
	}
	if cfg.Shared && (cfg.Path == "" || cfg.InMemory) {
		return nil, errors.New("dmaring: Shared needs a Path and a file-backed region")
	}
	var r *Region
	if cfg.InMemory {
		r = newMemRegion(l)
	} else if r, err = newFileRegion(l, cfg.Path); err != nil {
		return nil, err
	}
	var wake *Wakeups
	if cfg.Shared {
		wake, err = RegionWakeups(r)
	} else {
		wake, err = newWakeups(l.Queues)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	mac := cfg.MAC
	if mac == nil {
		mac = make(net.HardwareAddr, 6)
		rand.Read(mac)
		mac[0] = mac[0]&^1 | 2
	}
	e := &Endpoint{region: r, layout: l, wake: wake, mac: mac, txStamps: cfg.TxStamps}
	e.Init(tcpip.LinkAddress(mac), cfg.MTU)
	copy(r.mem[HdrMAC:HdrMAC+6], mac)
	l.writeHeader(r.mem, FeatureRxCsum|FeatureTxCsum|FeatureTs)
	if err := e.program(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// program places the rings, programs each register block as mqnic's
// driver opens its queues (disable, base, size, CQN, pointers, enable) and
// stocks the RX rings.
func (e *Endpoint) program() error {
	l := &e.layout
	r := e.region
	entries := 1 << l.RingLog
	next := l.RingArea
	place := func(bytes int) int {
		at := next
		next += pageUp(bytes)
		return at
	}
	var errs []error
	open := func(q Regs, base, logSize, cqn int, init byte, bytes int) {
		clear(r.mem[base : base+bytes])
		if init != 0 {
			// mqnic_open_cq/eq: memset(buf, 1): every phase bit 0.
			for i := base; i < base+bytes; i++ {
				r.mem[i] = init
			}
		}
		errs = append(errs,
			q.Command(CmdSetEnable))
		q.SetBase(uint64(base))
		errs = append(errs,
			q.Command(CmdSetSize|uint32(logSize)),
			q.Command(CmdSetCQN|uint32(cqn)),
			q.Command(CmdSetProdPtr),
			q.Command(CmdSetConsPtr),
			q.Command(CmdSetEnable|1))
	}
	for i := 0; i < l.Queues; i++ {
		eqBase := place(EventSize << l.EQLog)
		open(r.Regs(KindEQ, i), eqBase, l.EQLog, 0, 1, EventSize<<l.EQLog)
		txCQ, rxCQ := place(entries*CplSize), place(entries*CplSize)
		open(r.Regs(KindCQ, 2*i), txCQ, l.RingLog, i, 1, entries*CplSize)
		open(r.Regs(KindCQ, 2*i+1), rxCQ, l.RingLog, i, 1, entries*CplSize)
		txRing, rxRing := place(entries*DescSize), place(entries*DescSize)
		open(r.Regs(KindTX, i), txRing, l.RingLog, 2*i, 0, entries*DescSize)
		open(r.Regs(KindRX, i), rxRing, l.RingLog, 2*i+1, 0, entries*DescSize)

		bufs := l.BufArea + 2*i*entries*l.BufSize
		e.tx = append(e.tx, newTxQueue(e, i, txRing, txCQ, bufs))
		q := newRxQueue(e, i, rxRing, rxCQ, eqBase, bufs+entries*l.BufSize)
		e.rx = append(e.rx, q)
		q.refill()
	}
	if next > l.BufArea {
		return fmt.Errorf("dmaring: rings overflow their area (%#x > %#x)", next, l.BufArea)
	}
	return errors.Join(errs...)
}

// Region returns the host's mapping of the region: give it (or its File)
// to the device.
func (e *Endpoint) Region() *Region { return e.region }

// Wakeups returns the Notifiers an in-process device signals and waits on.
func (e *Endpoint) Wakeups() *Wakeups { return e.wake }

// MAC returns the endpoint's Ethernet address.
func (e *Endpoint) MAC() net.HardwareAddr { return e.mac }

// Queues returns the number of queue pairs.
func (e *Endpoint) Queues() int { return len(e.rx) }

// RxQueue returns RX queue i (0 <= i < Queues), a frame.Source of its own:
// run one goroutine per queue, they share no lock.
func (e *Endpoint) RxQueue(i int) *RxQueue { return e.rx[i] }

// Capabilities implements stack.LinkEndpoint.Capabilities: the device
// computes TX checksums (tx_csum_cmd) and the endpoint verifies RX ones
// with the device's sum, so the stack does neither.
func (e *Endpoint) Capabilities() stack.LinkEndpointCapabilities {
	return e.Endpoint.Capabilities() | stack.CapabilityRXChecksumOffload | stack.CapabilityTXChecksumOffload
}

// SetBusyPoll makes each RX goroutine poll its completion queue for up to d
// after it last found a frame before it arms the queue and sleeps on its
// event queue's Notifier (0, the default: sleep at once). It implements
// link.BusyPoller.
func (e *Endpoint) SetBusyPoll(d time.Duration) { e.busyPoll.Store(int64(max(d, 0))) }

// Attach implements stack.LinkEndpoint.Attach: a dispatcher starts one
// goroutine per RX queue, each delivering its queue's frames inline; nil
// asks them to stop without waiting (Close joins them), as link/tap does,
// since netstack detaches with its lock held.
func (e *Endpoint) Attach(d stack.NetworkDispatcher) {
	e.Endpoint.Attach(d)
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if d == nil {
		if e.running {
			e.stopping.Store(true)
			for _, n := range e.wake.EQ {
				n.Notify()
			}
		}
		return
	}
	if e.closing || e.running {
		return
	}
	e.running = true
	for _, q := range e.rx {
		if !q.state.CompareAndSwap(queueIdle, queueBusy) {
			continue // a frame-source reader holds it
		}
		e.wg.Add(1)
		go q.run()
	}
}

// Wait implements stack.LinkEndpoint.Wait. It does not block (see Attach);
// Close joins the goroutines.
func (*Endpoint) Wait() {}

// RxChecksumDrops implements link.ChecksumDropCounter.
func (e *Endpoint) RxChecksumDrops() (ipv4, tcp, udp, icmp uint64) {
	for _, q := range e.rx {
		d := &q.stats.badCsum
		ipv4 += d[linkbase.BadIPv4Checksum].Load()
		tcp += d[linkbase.BadTCPChecksum].Load()
		udp += d[linkbase.BadUDPChecksum].Load()
		icmp += d[linkbase.BadICMPChecksum].Load()
	}
	return
}

// Err returns the first error the device reported for one of the
// endpoint's queues (a queue it refused or stopped serving), nil when none.
// The other queues keep working.
func (e *Endpoint) Err() error {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if e.closed {
		return ErrClosed
	}
	r := e.region
	for k := KindEQ; k <= KindRX; k++ {
		for i := range e.layout.QueueCount(k) {
			if err := r.Regs(k, i).Err(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeviceErrors returns how many errors the device raised (error events),
// counted by the device in the region header.
func (e *Endpoint) DeviceErrors() uint64 {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if e.closed {
		return 0
	}
	return uint64(e.region.Load32(HdrDevErrors))
}

// WritePackets implements stack.LinkEndpoint.WritePackets. It does NOT
// take ownership of the packets: each is copied into a TX buffer of queue
// pkt.Hash mod Queues (a flow stays on one queue), and the queue's doorbell
// rung once per run of packets for it. A frame that does not fit a buffer,
// or finds its ring full after reclaiming completed buffers, is dropped and
// counted (Stats), never waited for; it is reported as written, like a frame
// lost on a cable.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	if e.stopping.Load() && e.Closed() {
		return 0, &tcpip.ErrClosedForSend{}
	}
	all := pkts.AsSlice()
	for len(all) > 0 {
		q := e.tx[int(all[0].Hash%uint32(len(e.tx)))]
		all = all[q.writeRun(all):]
	}
	return pkts.Len(), nil
}

// Send transmits one raw Ethernet frame on TX queue queue, as if the stack
// had written it (checksums are left as they are: no tx_csum_cmd). It does
// NOT take ownership of frame: the bytes are copied. It returns an error for
// a frame longer than a buffer or a full ring, and a closed endpoint.
func (e *Endpoint) Send(queue int, f []byte) error {
	if queue < 0 || queue >= len(e.tx) {
		return fmt.Errorf("dmaring: TX queue %d out of range", queue)
	}
	q := e.tx[queue]
	q.mu.Lock()
	err := q.sendLocked(f)
	q.doorbellLocked()
	q.mu.Unlock()
	q.kick()
	return err
}

// Close implements stack.LinkEndpoint.Close: it stops the RX goroutines and
// waits for them, wakes readers (they return io.EOF), unmaps the region
// (removing a file it created) and closes the Notifiers. A device still
// serving the region must be closed first. It must not be called from
// inside a frame's delivery.
func (e *Endpoint) Close() {
	e.runMu.Lock()
	if e.closing {
		e.runMu.Unlock()
		return
	}
	e.closing = true
	e.stopping.Store(true)
	e.runMu.Unlock()
	for _, n := range e.wake.EQ {
		n.Notify()
	}
	e.wg.Wait()
	for _, q := range e.rx {
		q.shut()
	}
	for _, q := range e.tx {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
	}
	e.wake.close()
	e.runMu.Lock()
	e.closed = true // Err and DeviceErrors read the region under runMu
	e.region.Close()
	e.runMu.Unlock()
	e.Endpoint.Close()
}

// Stats counts an Endpoint's traffic, summed over its queues. All counters
// only grow.
type Stats struct {
	RxFrames         uint64 // frames delivered to the stack or read
	RxBytes          uint64
	RxDropped        uint64 // frames dropped: no stack attached, runt
	RxBadCompletions uint64 // completions naming the wrong descriptor or a length past the buffer
	RxDeviceErrors   uint64 // completions the device marked with an error
	// Frames dropped for a wrong checksum (stack path).
	RxBadIPv4Checksum, RxBadTCPChecksum, RxBadUDPChecksum, RxBadICMPChecksum uint64
	TxFrames                                                                 uint64 // frames handed to the device
	TxBytes                                                                  uint64
	TxRingFull                                                               uint64 // frames dropped: ring full after reclaiming
	TxTooLong                                                                uint64 // frames dropped: longer than a buffer
	TxDeviceErrors                                                           uint64 // TX completions with an error
	TxCompleted                                                              uint64 // TX completions reclaimed
	TxStampsLost                                                             uint64 // TX stamps dropped unread (Config.TxStamps)
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	var s Stats
	for _, q := range e.rx {
		st := &q.stats
		s.RxFrames += st.frames.Load()
		s.RxBytes += st.bytes.Load()
		s.RxDropped += st.dropped.Load()
		s.RxBadCompletions += st.badCpl.Load()
		s.RxDeviceErrors += st.devErr.Load()
		s.RxBadIPv4Checksum += st.badCsum[linkbase.BadIPv4Checksum].Load()
		s.RxBadTCPChecksum += st.badCsum[linkbase.BadTCPChecksum].Load()
		s.RxBadUDPChecksum += st.badCsum[linkbase.BadUDPChecksum].Load()
		s.RxBadICMPChecksum += st.badCsum[linkbase.BadICMPChecksum].Load()
	}
	for _, q := range e.tx {
		st := &q.stats
		s.TxFrames += st.frames.Load()
		s.TxBytes += st.bytes.Load()
		s.TxRingFull += st.ringFull.Load()
		s.TxTooLong += st.tooLong.Load()
		s.TxDeviceErrors += st.devErr.Load()
		s.TxCompleted += st.completed.Load()
		s.TxStampsLost += st.stampsLost.Load()
	}
	return s
}

// txQueue is one TX ring and its completion queue. Writers of one queue
// share its mutex; different queues share nothing.
type txQueue struct {
	e       *Endpoint
	r       *Region
	idx     int
	regs    Regs
	cqRegs  Regs
	ring    int // descriptor ring offset
	cq      int // completion ring offset
	bufs    int // offset of buffer 0
	bufSize int
	size    uint32

	mu sync.Mutex
	// +checklocks:mu
	prod uint32 // descriptors posted (free-running)
	// +checklocks:mu
	done uint32 // descriptors completed (free-running)
	// +checklocks:mu
	posted bool // prod moved since the last doorbell
	// +checklocks:mu
	closed bool
	// +checklocks:mu
	ts stampClock
	// The TX stamps kept for TxStamps (nil without Config.TxStamps): a
	// ring of the last len(stamps) completions, stampHead - stampTail of
	// them not yet taken.
	// +checklocks:mu
	stamps []TxStamp
	// +checklocks:mu
	stampHead, stampTail uint32

	stats struct {
		frames, bytes, ringFull, tooLong, devErr, completed, stampsLost atomic.Uint64
	}
}

func newTxQueue(e *Endpoint, i, ring, cq, bufs int) *txQueue {
	q := &txQueue{
		e: e, r: e.region, idx: i, regs: e.region.Regs(KindTX, i), cqRegs: e.region.Regs(KindCQ, 2*i),
		ring: ring, cq: cq, bufs: bufs, bufSize: e.layout.BufSize, size: 1 << e.layout.RingLog,
	}
	if e.txStamps {
		q.stamps = make([]TxStamp, q.size)
	}
	return q
}

// reclaimLocked consumes the TX completions the device wrote, freeing
// their buffers, and returns the consumer pointer to the device.
//
// +checklocks:q.mu
func (q *txQueue) reclaimLocked() {
	mask := q.size - 1
	n := uint32(0)
	for q.done != q.prod {
		off := q.cq + int(q.done&mask)*CplSize
		if !EntryIsNew(q.r.Load32(off+CplPhase), q.done, q.size) {
			break
		}
		if q.r.mem[off+CplStatus] != 0 {
			q.stats.devErr.Add(1)
		}
		if q.stamps != nil {
			q.stampLocked(off)
		}
		q.done++
		n++
	}
	if n > 0 {
		q.stats.completed.Add(uint64(n))
		q.cqRegs.Store(RegHostPtr, q.done&PtrMask)
	}
}

// slotLocked returns the next free TX buffer and its ring index, reclaiming
// completions when the ring looks full; ok is false when it stays full.
//
// +checklocks:q.mu
func (q *txQueue) slotLocked() (buf []byte, ok bool) {
	if q.closed {
		return nil, false
	}
	if q.prod-q.done >= q.size/2 {
		q.reclaimLocked()
	}
	if q.prod-q.done >= q.size {
		q.stats.ringFull.Add(1)
		return nil, false
	}
	i := int(q.prod & (q.size - 1))
	at := q.bufs + i*q.bufSize
	return q.r.mem[at : at+q.bufSize : at+q.bufSize], true
}

// postLocked writes the descriptor for the frame of n bytes in the current
// slot.
//
// +checklocks:q.mu
func (q *txQueue) postLocked(n int, csumCmd uint16) {
	i := int(q.prod & (q.size - 1))
	PutDesc(q.r.mem[q.ring+i*DescSize:], csumCmd, uint32(n), uint64(q.bufs+i*q.bufSize))
	q.prod++
	q.posted = true
	q.stats.frames.Add(1)
	q.stats.bytes.Add(uint64(n))
}

// writeLocked copies pkt into the next buffer and posts it.
//
// +checklocks:q.mu
func (q *txQueue) writeLocked(pkt *stack.PacketBuffer) {
	size := pkt.Size()
	if size > q.bufSize {
		q.stats.tooLong.Add(1)
		return
	}
	buf, ok := q.slotLocked()
	if !ok {
		return
	}
	n := 0
	views, off := pkt.AsViewList()
	for v := views.Front(); v != nil; v = v.Next() {
		s := v.AsSlice()
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n += copy(buf[n:], s[off:])
		off = 0
	}
	q.postLocked(n, txChecksumCommand(buf[:n]))
}

// writeRun writes the leading packets of pkts that go to q, rings the
// doorbell once and returns how many it took.
func (q *txQueue) writeRun(pkts []*stack.PacketBuffer) int {
	n := len(q.e.tx)
	q.mu.Lock()
	i := 0
	for ; i < len(pkts) && int(pkts[i].Hash%uint32(n)) == q.idx; i++ {
		q.writeLocked(pkts[i])
	}
	q.doorbellLocked()
	q.mu.Unlock()
	q.kick()
	return i
}

// +checklocks:q.mu
func (q *txQueue) sendLocked(f []byte) error {
	if len(f) > q.bufSize {
		q.stats.tooLong.Add(1)
		return fmt.Errorf("dmaring: frame of %d bytes longer than a buffer (%d)", len(f), q.bufSize)
	}
	buf, ok := q.slotLocked()
	if !ok {
		if q.closed {
			return ErrClosed
		}
		return errors.New("dmaring: TX ring full")
	}
	q.postLocked(copy(buf, f), 0)
	return nil
}

// doorbellLocked rings the doorbell (SET_PROD_PTR) when descriptors were
// posted since the last one.
//
// +checklocks:q.mu
func (q *txQueue) doorbellLocked() {
	if q.posted {
		q.posted = false
		q.regs.Store(RegHostPtr, q.prod&PtrMask) // CmdSetProdPtr, inlined
	}
}

// kick wakes the device when it sleeps (after a doorbell).
func (q *txQueue) kick() {
	if q.r.Load32(HdrDevSleep) != 0 {
		q.e.wake.Device.Notify()
	}
}

// deliverStack copies one received frame into a new packet and hands it to
// the stack.
func (q *RxQueue) deliverStack(f []byte, rx int64, csum uint16, haveCsum bool) {
	if v := rxChecksum(f, csum, haveCsum); v != linkbase.ChecksumOK {
		q.stats.badCsum[v].Add(1)
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)})
	if q.e.DeliverFrameAt(pkt, rx) {
		q.stats.frames.Add(1)
		q.stats.bytes.Add(uint64(len(f)))
	} else {
		q.stats.dropped.Add(1)
	}
	pkt.DecRef()
}
