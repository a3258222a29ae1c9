package nicsim

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"

	"github.com/tickwire/tickwire/link/dmaring"
)

// txLead bounds how far the link time may run ahead of the device clock: a
// burst the link cannot carry yet is completed up to txLead before the
// stamps its frames get, and beyond that the TX goroutine waits for the
// clock, so frames leave no faster than the link rate on average.
const txLead = time.Millisecond

// txWaitPoll bounds each sleep of the TX goroutine while the TX scheduler
// holds back every ready queue, so that work on another queue, or Close,
// is noticed within it.
const txWaitPoll = 100 * time.Microsecond

// ErrNoDescriptor is returned by Device.Receive when the RX queue the frame
// is steered to has no free descriptor (the frame is dropped and counted).
var ErrNoDescriptor = errors.New("nicsim: RX queue has no free descriptor")

// ErrNotRunning is returned by Device.Receive when the RX queue is not
// enabled or the device refused its configuration.
var ErrNotRunning = errors.New("nicsim: RX queue not enabled")

// Config configures New.
type Config struct {
	// Region is the host's region. The device maps it again (Region.Map)
	// and unmaps its own mapping on Close.
	Region *dmaring.Region
	// Wakeups are the host's Notifiers (Endpoint.Wakeups); nil means the
	// device neither sleeps (it polls, yielding between passes) nor raises
	// interrupts (the host must poll).
	Wakeups *dmaring.Wakeups
	// Wire carries frames to and from the outside; nil discards transmitted
	// frames and receives only through Device.Receive.
	Wire Wire
	// Poll is how long the TX loop keeps polling the doorbells after it last
	// found work before it sleeps (with Wakeups). Default 0: sleep at once.
	Poll time.Duration
	// Clock is the device clock; nil starts one from the host's real-time
	// clock.
	Clock *Clock
	// RSS steers received frames to RX queues and gives the hash and hash
	// type their completions carry. Nil means NewRSS with DefaultRSSKey,
	// the default indirection table and the region's queue count. Every
	// entry of its table must name one of the region's RX queues: New
	// refuses an RSS built for more queues than the region has.
	RSS *RSS
	// TxScheduler picks the TX queue each frame is sent from, among the
	// enabled queues with a descriptor posted and room in their completion
	// queue; the device asks it once per frame, at the time the link is
	// free, from its TX goroutine only. Nil means a new RoundRobin. A
	// TDMAScheduler gates the queues by time slot on the device clock. A
	// scheduler that answers a queue outside ready is a programming error:
	// the TX goroutine panics.
	TxScheduler TxScheduler
	// LinkRate is the wire's bit rate. A frame occupies the link for
	// LinkRate.FrameTime of its length, frames leave one after another,
	// and a TX completion is stamped when its frame has left: the time it
	// started (what the Wire's Transmit gets) plus its frame time. Zero
	// means Rate10G; a negative rate is an infinitely fast link (frame time
	// 0, a completion stamped when the device takes the descriptor).
	LinkRate LinkRate
}

// Stats counts what the device did. All counters only grow.
type Stats struct {
	TxFrames, TxBytes uint64 // frames taken from TX rings and put on the wire
	RxFrames, RxBytes uint64 // frames written to RX rings
	RxNoDescriptor    uint64 // frames dropped: RX ring empty
	RxNotRunning      uint64 // frames dropped: RX queue not enabled
	RxCQFull          uint64 // frames dropped: RX completion queue full
	Errors            uint64 // errors raised (error events), by any queue
	EventsDropped     uint64 // events lost to a full event queue
}

// queueState is the device's cached, validated view of one queue's
// registers, refreshed when the host disables and re-enables it.
type queueState struct {
	configured bool   // validated and serving
	failed     bool   // refused or stopped until the host disables it
	ctrl       uint32 // the control word validated (its generation)
	base       int
	size       uint32
	cqn        int
	cons       uint32 // TX/RX: device's consumer pointer; CQ/EQ: producer pointer
	// host is the host's pointer (TX/RX: producer; CQ/EQ: consumer) as the
	// device last read it. The device rereads the register only when this
	// copy says the ring is empty (TX/RX) or full (CQ/EQ), as a NIC fetches
	// descriptors in bursts: the host writes that cache line, and reading it
	// per frame would move the line between the two cores on every frame.
	host uint32
}

// ring is one queue and the lock of its device-side state.
type ring struct {
	mu sync.Mutex
	// +checklocks:mu
	st queueState
	// +checklocks:mu
	dead bool // the device closed: the region is unmapped
	regs dmaring.Regs
	kind dmaring.QueueKind
	idx  int
}

// Device is the software NIC serving one region. TX is served by one
// goroutine (started by New) that sends one frame at a time from the queue
// Config.TxScheduler picks, paced at Config.LinkRate; RX by
// whoever calls Receive (the wire's goroutine). Each queue, CQ and EQ has
// its own device-side lock, so RX queues and TX never contend. Close stops
// it.
//
// Lock order (a queue completes on its CQ, which raises events on its EQ;
// errors go to the EQ of the queue that raised them):
//
//	TX or RX queue ring.mu
//	  CQ ring.mu
//	    EQ ring.mu
type Device struct {
	r     *dmaring.Region
	l     dmaring.Layout
	wake  *dmaring.Wakeups
	wire  Wire
	clock *Clock
	poll  time.Duration
	rss   *RSS
	sched TxScheduler
	rate  LinkRate

	// The link, owned by the TX goroutine (run, or a test calling serveTX):
	// linkFree is the device time at which the last frame finished, resume
	// the time a scheduler wait ended at (0: none), lastNow the clock's
	// last reading, to notice a clock stepped back.
	linkFree, resume, lastNow int64

	eq, cq, tx, rx []*ring

	txScratch []byte // the frame being transmitted, with its checksum inserted

	stopping atomic.Bool
	closed   atomic.Bool
	done     chan struct{}

	clockSec atomic.Uint64 // seconds last written to the clock register

	stats struct {
		txFrames, txBytes, rxFrames, rxBytes            atomic.Uint64
		rxNoDesc, rxNotRunning, rxCQFull, errs, evDrops atomic.Uint64
	}
}

// New maps cfg.Region, starts serving it and starts the wire.
func New(cfg Config) (*Device, error) {
	if cfg.Region == nil {
		return nil, errors.New("nicsim: Config.Region is nil")
	}
	r, err := cfg.Region.Map()
	if err != nil {
		return nil, err
	}
	d, err := newDevice(r, cfg)
	if err != nil {
		r.Close()
		return nil, err
	}
	d.r.Store32(dmaring.HdrDevState, dmaring.DevStateRunning)
	go d.run()
	if d.wire != nil {
		if err := d.wire.Start(d); err != nil {
			d.Close()
			return nil, fmt.Errorf("nicsim: start wire: %w", err)
		}
	}
	return d, nil
}

// newDevice builds a device over r (already mapped) without starting it.
func newDevice(r *dmaring.Region, cfg Config) (*Device, error) {
	l := r.Layout()
	if len(r.Bytes()) < l.Size {
		return nil, fmt.Errorf("%w: %s", dmaring.ErrBadRegion, dmaring.ErrRegionSmall)
	}
	if cfg.Wakeups != nil && (len(cfg.Wakeups.EQ) != l.Queues || cfg.Wakeups.Device == nil) {
		return nil, errors.New("nicsim: Config.Wakeups do not match the region's queues")
	}
	d := &Device{
		r: r, l: l, wake: cfg.Wakeups, wire: cfg.Wire, clock: cfg.Clock, poll: cfg.Poll,
		done: make(chan struct{}), txScratch: make([]byte, l.BufSize), rss: cfg.RSS,
		sched: cfg.TxScheduler, rate: cfg.LinkRate,
	}
	if d.clock == nil {
		d.clock = NewClock()
	}
	if d.sched == nil {
		d.sched = &RoundRobin{}
	}
	if d.rate == 0 {
		d.rate = Rate10G
	}
	if d.rss == nil {
		rss, err := NewRSS(RSSConfig{Queues: l.Queues})
		if err != nil {
			return nil, err
		}
		d.rss = rss
	}
	for i, q := range d.rss.table {
		if int(q) >= l.Queues {
			return nil, fmt.Errorf("%w: indirection table entry %d is queue %d, but the region has %d RX queues",
				ErrRSSConfig, i, q, l.Queues)
		}
	}
	mk := func(k dmaring.QueueKind) []*ring {
		rs := make([]*ring, l.QueueCount(k))
		for i := range rs {
			rs[i] = &ring{regs: r.Regs(k, i), kind: k, idx: i}
		}
		return rs
	}
	d.eq, d.cq, d.tx, d.rx = mk(dmaring.KindEQ), mk(dmaring.KindCQ), mk(dmaring.KindTX), mk(dmaring.KindRX)
	d.updateClock(true)
	return d, nil
}

// Stats returns the device's counters.
func (d *Device) Stats() Stats {
	s := &d.stats
	return Stats{
		TxFrames: s.txFrames.Load(), TxBytes: s.txBytes.Load(), RxFrames: s.rxFrames.Load(), RxBytes: s.rxBytes.Load(),
		RxNoDescriptor: s.rxNoDesc.Load(), RxNotRunning: s.rxNotRunning.Load(), RxCQFull: s.rxCQFull.Load(),
		Errors: s.errs.Load(), EventsDropped: s.evDrops.Load(),
	}
}

// Clock returns the device clock.
func (d *Device) Clock() *Clock { return d.clock }

// Close stops the wire and the TX loop and unmaps the device's view of the
// region. It is idempotent.
func (d *Device) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	var err error
	if d.wire != nil {
		err = d.wire.Close()
	}
	d.stopping.Store(true)
	if d.wake != nil {
		d.wake.Device.Notify()
	}
	<-d.done
	// Receive holds each RX ring's lock while it touches the region.
	for _, q := range d.rx {
		q.mu.Lock()
		q.dead = true
		q.mu.Unlock()
	}
	d.r.Store32(dmaring.HdrDevState, dmaring.DevStateStopped)
	d.r.Close()
	return err
}

// updateClock writes the device clock register when the seconds changed
// since it last did (or always with force), so the host can extend the
// 16-bit seconds of a stamp.
func (d *Device) updateClock(force bool) { d.updateClockAt(d.clock.Now(), force) }

// updateClockAt is updateClock with the clock's reading, now.
func (d *Device) updateClockAt(now int64, force bool) {
	sec := uint64(now / 1e9)
	if !force && d.clockSec.Load() == sec {
		return
	}
	d.clockSec.Store(sec)
	d.r.SetDeviceClock(sec, uint32(now%1e9))
}

// run is the TX loop.
func (d *Device) run() {
	defer close(d.done)
	var idleSince time.Time
	for !d.stopping.Load() {
		if d.serveTX() {
			idleSince = time.Time{}
			continue
		}
		d.updateClock(false)
		if d.wake == nil {
			runtime.Gosched()
			continue
		}
		if d.poll > 0 {
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			if time.Since(idleSince) < d.poll {
				runtime.Gosched()
				continue
			}
		}
		idleSince = time.Time{}
		// Say we sleep, then look again: a host that rang a doorbell
		// before it saw the flag is found here, one that rings after sees
		// it and notifies.
		d.r.Store32(dmaring.HdrDevSleep, 1)
		if !d.txPending() && !d.stopping.Load() {
			if d.wake.Device.Wait() != nil {
				// The host closed its Notifiers: poll slowly until Close.
				time.Sleep(time.Millisecond)
			}
		}
		d.r.Store32(dmaring.HdrDevSleep, 0)
	}
}

// txPending reports whether a TX doorbell moved past the device's pointer.
func (d *Device) txPending() bool {
	for _, q := range d.tx {
		q.mu.Lock()
		p := q.st.configured && !q.st.failed && (q.regs.Load(dmaring.RegHostPtr)-q.st.cons)&dmaring.PtrMask != 0
		q.mu.Unlock()
		if p {
			return true
		}
	}
	return false
}

// serveTX sends one frame from the TX queue the scheduler picks, or waits
// while the scheduler holds back every ready queue (waitTX). It reports
// false when no TX queue has work.
//
// The link has its own time, linkFree, the end of the last frame: a frame
// starts when both the link is free and the device sees it, at
// max(linkFree, now), and the scheduler is asked at that time. After a
// wait that ended because the device clock reached the scheduler's retry
// time, the next frame starts at that time itself, however late the TX
// goroutine woke: the frame was already waiting, and a NIC would have sent
// it then. Stepping the clock back (Receive with a replay's times) resets
// the link to the clock.
func (d *Device) serveTX() bool {
	ready := d.txReady()
	if ready == 0 {
		d.resume = 0
		return false
	}
	now := d.clock.Now()
	d.updateClockAt(now, false)
	if now < d.lastNow {
		d.linkFree, d.resume = now, 0
	}
	d.lastNow = now
	at := max(d.linkFree, now)
	if d.resume != 0 {
		at, d.resume = max(d.linkFree, d.resume), 0
	}
	q, retry := d.sched.Next(ready, at)
	if q < 0 {
		d.waitTX(ready, retry)
		return true
	}
	if !ready.Has(q) {
		panic(fmt.Sprintf("nicsim: TxScheduler.Next returned queue %d, not one of the ready queues %#x", q, ready))
	}
	if end, ok := d.transmit(d.tx[q], at); ok {
		d.linkFree = end
	}
	// Let the link run ahead of the clock by at most txLead.
	for lead := d.linkFree - d.clock.Now(); lead > int64(txLead) && !d.stopping.Load(); lead = d.linkFree - d.clock.Now() {
		time.Sleep(min(time.Duration(lead)-txLead, time.Millisecond))
	}
	return true
}

// waitTX waits until the device clock reaches retry (then the next frame
// starts at retry: see serveTX), until a TX queue outside ready has work,
// or until Close, sleeping at most txWaitPoll at a time. retry Never waits
// for new work only.
func (d *Device) waitTX(ready QueueMask, retry int64) {
	for !d.stopping.Load() {
		now := d.clock.Now()
		if retry != Never && now >= retry {
			d.resume = retry
			return
		}
		if d.txReady()&^ready != 0 {
			return
		}
		wait := txWaitPoll
		if retry != Never {
			wait = min(wait, time.Duration(retry-now))
		}
		time.Sleep(wait)
	}
}

// txReady returns the TX queues that are enabled, have a descriptor posted
// and have room in their completion queue (a frame is only taken when its
// completion can be written, so it is never sent twice).
func (d *Device) txReady() QueueMask {
	var m QueueMask
	for i, q := range d.tx {
		q.mu.Lock()
		ok := d.validate(q)
		var n uint32
		if ok {
			n, ok = d.available(q)
		}
		cqn := q.st.cqn
		q.mu.Unlock()
		if ok && n > 0 && d.cqRoom(cqn) {
			m |= 1 << uint(i) // i < dmaring.MaxQueues == MaxSchedQueues
		}
	}
	return m
}

// cqRoom reports whether CQ cqn is serving and not full.
func (d *Device) cqRoom(cqn int) bool {
	q := d.cq[cqn]
	q.mu.Lock()
	defer q.mu.Unlock()
	return d.validate(q) && room(q)
}

// raise reports an error on queue q: its status register and error count,
// the region header, and an error event on the queue's event queue.
func (d *Device) raise(kind dmaring.QueueKind, idx int, regs dmaring.Regs, code dmaring.ErrCode, sticky bool) {
	d.stats.errs.Add(1)
	if sticky {
		regs.Store(dmaring.RegStatus, uint32(code)<<16)
	}
	regs.Store(dmaring.RegErrors, regs.Load(dmaring.RegErrors)+1)
	d.r.Add32(dmaring.HdrDevErrors, 1)
	d.r.Store32(dmaring.HdrDevLastErr, uint32(code))
	d.r.Store32(dmaring.HdrDevLastQ, uint32(kind)<<16|uint32(idx))
	eqn := idx
	if kind == dmaring.KindCQ {
		eqn = idx / 2
	}
	// An event queue's own error has no queue to go to: the caller holds
	// that queue's lock, and the queue is what is broken.
	if kind != dmaring.KindEQ && eqn < len(d.eq) {
		d.postEvent(eqn, dmaring.EventTypeError, idx, uint32(code), uint32(kind))
	}
}

// validate checks q's registers once the host enabled it and caches them;
// it reports whether q may be served. The caller holds q.mu.
//
// +checklocks:q.mu
func (d *Device) validate(q *ring) bool {
	ctrl := q.regs.Load(dmaring.RegCtrl)
	if ctrl != q.st.ctrl && (q.st.configured || q.st.failed) {
		q.st = queueState{} // disabled, or re-enabled since we looked
		q.regs.Store(dmaring.RegStatus, 0)
	}
	if ctrl&dmaring.CtrlEnable == 0 {
		return false
	}
	if q.st.failed {
		return false
	}
	if q.st.configured {
		return true
	}
	base := q.regs.Base()
	logSize := q.regs.LogSize()
	cqn := int(q.regs.CQN())
	stride := dmaring.DescSize
	if q.kind == dmaring.KindCQ {
		stride = dmaring.CplSize
	} else if q.kind == dmaring.KindEQ {
		stride = dmaring.EventSize
	}
	code := dmaring.ErrNone
	switch {
	case base%dmaring.PageSize != 0:
		code = dmaring.ErrBaseAlign
	case logSize < dmaring.MinLogSize || logSize > dmaring.MaxLogSize:
		code = dmaring.ErrLogSize
	case base < uint64(d.l.RingArea) || base+uint64(stride)<<logSize > uint64(d.l.BufArea):
		code = dmaring.ErrRingOutside
	case q.kind == dmaring.KindCQ && cqn >= len(d.eq),
		(q.kind == dmaring.KindTX || q.kind == dmaring.KindRX) && cqn >= len(d.cq):
		code = dmaring.ErrBadCQN
	}
	if code != dmaring.ErrNone {
		q.st.failed, q.st.ctrl = true, ctrl
		d.raise(q.kind, q.idx, q.regs, code, true)
		return false
	}
	cons := q.regs.Load(dmaring.RegDevPtr) & dmaring.PtrMask
	q.st = queueState{configured: true, ctrl: ctrl, base: int(base), size: 1 << logSize, cqn: cqn, cons: cons, host: cons}
	q.regs.Store(dmaring.RegStatus, dmaring.StatusActive)
	return true
}

// available returns the descriptors the host posted beyond the device's
// pointer, failing the queue when the producer pointer is past the ring. It
// reads the producer pointer only when the copy it last read is used up
// (queueState.host).
//
// +checklocks:q.mu
func (d *Device) available(q *ring) (uint32, bool) {
	if n := (q.st.host - q.st.cons) & dmaring.PtrMask; n != 0 {
		return n, true
	}
	prod := q.regs.Load(dmaring.RegHostPtr)
	n := (prod - q.st.cons) & dmaring.PtrMask
	if n > q.st.size {
		q.st.failed = true
		d.raise(q.kind, q.idx, q.regs, dmaring.ErrProdPtr, true)
		return 0, false
	}
	q.st.host = prod
	return n, true
}

// room reports whether CQ or EQ q has room for one more entry, rereading
// the host's consumer pointer only when the copy it last read says the
// ring is full (queueState.host). The caller holds q.mu.
//
// +checklocks:q.mu
func room(q *ring) bool {
	if (q.st.cons-q.st.host)&dmaring.PtrMask < q.st.size {
		return true
	}
	q.st.host = q.regs.Load(dmaring.RegHostPtr)
	return (q.st.cons-q.st.host)&dmaring.PtrMask < q.st.size
}

// disarm clears the arm word of CQ or EQ q when the host set it, and
// reports whether it did. It reads the word before it swaps it: a polling
// host leaves it 0, and a compare-and-swap would take the cache line the
// host writes its consumer pointer in away from it on every completion.
func disarm(q *ring) bool {
	return q.regs.Load(dmaring.RegArm) != 0 && q.regs.CompareAndSwap(dmaring.RegArm, 1, 0)
}

// desc reads the descriptor at the device's pointer and checks it names a
// buffer inside the buffer area no longer than the buffer size.
//
// +checklocks:q.mu
func (d *Device) desc(q *ring) (csumCmd uint16, addr, length int, code dmaring.ErrCode) {
	off := q.st.base + int(q.st.cons&(q.st.size-1))*dmaring.DescSize
	b := d.r.Bytes()[off : off+dmaring.DescSize]
	csumCmd = le.Uint16(b[dmaring.DescCsumCmd:])
	l := le.Uint32(b[dmaring.DescLen:])
	a := le.Uint64(b[dmaring.DescAddr:])
	if l == 0 || l > uint32(d.l.BufSize) {
		return 0, 0, 0, dmaring.ErrDescLen
	}
	if a < uint64(d.l.BufArea) || a+uint64(l) > uint64(d.l.BufArea+d.l.BufLen) {
		return 0, 0, 0, dmaring.ErrDescAddr
	}
	return csumCmd, int(a), int(l), dmaring.ErrNone
}

// completion is what the device writes for one descriptor.
type completion struct {
	queue, index, length int
	ts                   int64
	status               dmaring.ErrCode
	csum                 uint16
	haveCsum             bool
	hash                 uint32
	hashType             uint8
}

// complete writes c to CQ cqn and raises a completion event when the CQ is
// armed. It reports false when the CQ is full, disabled or refused (the
// caller stalls or drops).
func (d *Device) complete(cqn int, c *completion) bool {
	q := d.cq[cqn]
	q.mu.Lock()
	if !d.validate(q) {
		q.mu.Unlock()
		return false
	}
	if !room(q) {
		q.mu.Unlock()
		return false
	}
	off := q.st.base + int(q.st.cons&(q.st.size-1))*dmaring.CplSize
	b := d.r.Bytes()[off : off+dmaring.CplSize]
	le.PutUint16(b[dmaring.CplQueue:], uint16(c.queue))
	le.PutUint16(b[dmaring.CplIndex:], uint16(c.index))
	le.PutUint16(b[dmaring.CplLen:], uint16(c.length))
	le.PutUint16(b[6:], 0)
	le.PutUint32(b[dmaring.CplTsNs:], uint32(c.ts%1e9))
	le.PutUint16(b[dmaring.CplTsS:], uint16(c.ts/1e9))
	le.PutUint16(b[dmaring.CplRxCsum:], c.csum)
	le.PutUint32(b[dmaring.CplRxHash:], c.hash)
	b[dmaring.CplHashType] = c.hashType
	b[dmaring.CplPort] = 0
	b[dmaring.CplStatus] = byte(c.status)
	var flags byte
	if c.haveCsum {
		flags |= dmaring.CplFlagCsum
	}
	b[dmaring.CplFlags] = flags
	le.PutUint32(b[24:], 0)
	d.r.Store32(off+dmaring.CplPhase, dmaring.PhaseFor(q.st.cons, q.st.size))
	q.st.cons++
	q.regs.Store(dmaring.RegDevPtr, q.st.cons&dmaring.PtrMask)
	armed := disarm(q)
	eqn := q.st.cqn
	q.mu.Unlock()
	if armed {
		d.postEvent(eqn, dmaring.EventTypeCpl, cqn, 0, 0)
	}
	return true
}

// postEvent writes an event to EQ eqn and interrupts the host when the EQ
// is armed.
func (d *Device) postEvent(eqn int, typ uint16, source int, code, kind uint32) {
	q := d.eq[eqn]
	q.mu.Lock()
	if !d.validate(q) {
		q.mu.Unlock()
		d.stats.evDrops.Add(1)
		return
	}
	if !room(q) {
		q.mu.Unlock()
		d.stats.evDrops.Add(1)
		d.interrupt(eqn, q)
		return
	}
	off := q.st.base + int(q.st.cons&(q.st.size-1))*dmaring.EventSize
	b := d.r.Bytes()[off : off+dmaring.EventSize]
	clear(b[:dmaring.EventPhase])
	le.PutUint16(b[dmaring.EventType:], typ)
	le.PutUint16(b[dmaring.EventSource:], uint16(source))
	le.PutUint32(b[dmaring.EventCode:], code)
	le.PutUint32(b[dmaring.EventKind:], kind)
	d.r.Store32(off+dmaring.EventPhase, dmaring.PhaseFor(q.st.cons, q.st.size))
	q.st.cons++
	q.regs.Store(dmaring.RegDevPtr, q.st.cons&dmaring.PtrMask)
	q.mu.Unlock()
	d.interrupt(eqn, q)
}

// interrupt notifies EQ eqn's Notifier when the host armed the EQ.
func (d *Device) interrupt(eqn int, q *ring) {
	if disarm(q) && d.wake != nil {
		d.wake.EQ[eqn].Notify()
	}
}

// transmit sends the frame of q's next descriptor, starting on the link at
// at, and completes it stamped at + its frame time; it returns that end
// time. A bad descriptor is completed with its error at at and takes no
// link time. It reports false, sending nothing, when q has no descriptor
// or its CQ refuses the completion (see txReady).
func (d *Device) transmit(q *ring, at int64) (end int64, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !d.validate(q) {
		return at, false
	}
	if avail, ok := d.available(q); !ok || avail == 0 {
		return at, false
	}
	csumCmd, addr, length, code := d.desc(q)
	c := completion{queue: q.idx, index: int(q.st.cons & (q.st.size - 1)), length: length, status: code, ts: at}
	var f []byte
	if code == dmaring.ErrNone {
		f = d.txScratch[:length]
		copy(f, d.r.Bytes()[addr:addr+length])
		insertChecksum(f, csumCmd)
		c.ts = at + int64(d.rate.FrameTime(length))
	} else {
		d.raise(q.kind, q.idx, q.regs, code, false)
	}
	// Complete before the wire sees the frame: a CQ the host shares with
	// an RX queue can fill after txReady looked, and a frame sent without
	// its completion would be sent again.
	if !d.complete(q.st.cqn, &c) {
		return at, false
	}
	q.st.cons++
	q.regs.Store(dmaring.RegDevPtr, q.st.cons&dmaring.PtrMask)
	if code != dmaring.ErrNone {
		return at, true
	}
	if d.wire != nil {
		d.wire.Transmit(f, at)
	}
	d.stats.txFrames.Add(1)
	d.stats.txBytes.Add(uint64(length))
	return c.ts, true
}

// insertChecksum carries out a TX checksum command on f: the one's
// complement of the sum from start to the end, seeded with the field,
// stored in the field (mqnic's tx_csum_cmd). A command pointing past the
// frame is ignored.
func insertChecksum(f []byte, cmd uint16) {
	if cmd&dmaring.TxCsumEnable == 0 {
		return
	}
	start := int(cmd & 0xff)
	at := start + int(cmd>>8&0x7f)
	if at+2 > len(f) {
		return
	}
	s := ^checksum.Checksum(f[start:], 0)
	if s == 0 && at-start == 6 {
		s = 0xffff // UDP sends a computed zero as all ones
	}
	f[at], f[at+1] = byte(s>>8), byte(s)
}

// Receive puts one frame that arrived from the wire at time ts into the
// RX queue RSS picks (Config.RSS, RSS.Classify), and completes it with
// the frame's RSS hash and hash type. ts 0 means now on the device
// clock; any other ts (Unix ns) steps the device clock to it first, as a
// replay keeping capture times does: a completion holds only 16 bits of
// seconds, so the clock register must agree with the stamps. It does NOT take ownership of frame: the bytes are copied into the
// host's buffer. It returns ErrNoDescriptor or ErrNotRunning when the frame
// was dropped (and counted) for want of a buffer or a running queue, and
// is safe for concurrent use (each RX queue has its own lock).
func (d *Device) Receive(frame []byte, ts int64) error {
	hash, hashType, qi := d.rss.Classify(frame) // qi < len(d.rx): newDevice checked the table
	return d.receiveOn(d.rx[qi], frame, ts, hash, hashType)
}

// ReceiveOn is Receive into RX queue queue, bypassing RSS (the completion
// has hash 0 and hash type 0): a test or benchmark that fills chosen
// queues. It returns an error for a queue out
// of range.
func (d *Device) ReceiveOn(queue int, frame []byte, ts int64) error {
	if queue < 0 || queue >= len(d.rx) {
		return fmt.Errorf("nicsim: RX queue %d out of range", queue)
	}
	return d.receiveOn(d.rx[queue], frame, ts, 0, 0)
}

func (d *Device) receiveOn(q *ring, frame []byte, ts int64, hash, hashType uint32) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead || !d.validate(q) {
		d.stats.rxNotRunning.Add(1)
		return ErrNotRunning
	}
	avail, ok := d.available(q)
	if !ok {
		d.stats.rxNotRunning.Add(1)
		return ErrNotRunning
	}
	if avail == 0 {
		d.stats.rxNoDesc.Add(1)
		return ErrNoDescriptor
	}
	if ts == 0 {
		ts = d.clock.Now() // the one clock read per frame: it is the slow part here
	} else {
		d.clock.Step(ts)
	}
	d.updateClockAt(ts, false)
	_, addr, length, code := d.desc(q)
	c := completion{queue: q.idx, index: int(q.st.cons & (q.st.size - 1)), ts: ts, hash: hash, hashType: uint8(hashType)}
	if code == dmaring.ErrNone && len(frame) > length {
		code = dmaring.ErrFrameTooLong
	}
	if code != dmaring.ErrNone {
		d.raise(q.kind, q.idx, q.regs, code, false)
		c.status = code
	} else {
		copy(d.r.Bytes()[addr:addr+len(frame)], frame)
		c.length = len(frame)
		if len(frame) > 14 {
			c.csum, c.haveCsum = checksum.Checksum(frame[14:], 0), true
		}
	}
	if !d.complete(q.st.cqn, &c) {
		d.stats.rxCQFull.Add(1)
		return ErrNoDescriptor
	}
	q.st.cons++
	q.regs.Store(dmaring.RegDevPtr, q.st.cons&dmaring.PtrMask)
	if code != dmaring.ErrNone {
		return &dmaring.DeviceError{Kind: dmaring.KindRX, Queue: q.idx, Code: code}
	}
	d.stats.rxFrames.Add(1)
	d.stats.rxBytes.Add(uint64(len(frame)))
	return nil
}
