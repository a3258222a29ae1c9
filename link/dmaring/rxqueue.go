package dmaring

import (
	"errors"
	"io"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/tickwire/tickwire/link/frame"
	"github.com/tickwire/tickwire/link/internal/linkbase"
)

// rxBatch bounds the completions one pass of the stack's RX goroutine
// handles before it returns the consumer pointer and refills the ring, as
// NAPI's budget does in mqnic_process_rx_cq.
const rxBatch = 64

// ErrInUse is returned by a frame-source call on an RX queue that a stack
// or another reader is using.
var ErrInUse = errors.New("dmaring: RX queue in use by a stack or another reader")

// RxQueue is one RX ring, its completion queue and its event queue, read by
// one goroutine: the stack's (while one is attached) or a frame-source
// reader's. Its ReadFrames copies; BorrowFrames hands out the ring's own
// buffers until ReleaseBorrowed. Calls from two goroutines at once get
// ErrInUse; queues share no lock with each other.
type RxQueue struct {
	e       *Endpoint
	r       *Region
	idx     int
	regs    Regs
	cqRegs  Regs
	eqRegs  Regs
	wake    *Notifier
	ring    int
	cq      int
	eq      int
	bufs    int
	bufSize int
	size    uint32
	eqSize  uint32

	state atomic.Int32 // queueIdle, queueBusy, queueClosed

	// Owned by the goroutine holding inUse.
	prod     uint32 // descriptors posted
	done     uint32 // completions consumed (the CQ consumer pointer)
	released uint32 // buffers given back (prod - released <= size)
	borrowed bool   // frames handed out by BorrowFrames not yet released
	eqCons   uint32
	tsSec    uint64 // full device seconds the last stamp was extended with
	tsValid  bool

	_     [64]byte // the counters below are written per batch: own cache line
	stats struct {
		frames, bytes, dropped, badCpl, devErr atomic.Uint64
		badCsum                                [linkbase.BadICMPChecksum + 1]atomic.Uint64
	}
}

func newRxQueue(e *Endpoint, i, ring, cq, eq, bufs int) *RxQueue {
	r := e.region
	return &RxQueue{
		e: e, r: r, idx: i, regs: r.Regs(KindRX, i), cqRegs: r.Regs(KindCQ, 2*i+1), eqRegs: r.Regs(KindEQ, i),
		wake: e.wake.EQ[i], ring: ring, cq: cq, eq: eq, bufs: bufs, bufSize: e.layout.BufSize,
		size: 1 << e.layout.RingLog, eqSize: 1 << e.layout.EQLog,
	}
}

// refill posts every released buffer (mqnic_refill_rx_buffers) and rings
// the doorbell.
func (q *RxQueue) refill() {
	target := q.released + q.size
	if q.prod == target {
		return
	}
	for ; q.prod != target; q.prod++ {
		i := int(q.prod & (q.size - 1))
		PutDesc(q.r.mem[q.ring+i*DescSize:], 0, uint32(q.bufSize), uint64(q.bufs+i*q.bufSize))
	}
	q.regs.Store(RegHostPtr, q.prod&PtrMask)
	// No wake-up for the device: it reads an RX ring's producer pointer
	// when a frame arrives from the wire, not when the host posts buffers.
}

// rxMeta is what a completion says about its frame.
type rxMeta struct {
	buf      []byte // the whole buffer
	n        int    // frame bytes in buf
	rx       int64  // Unix ns, 0 when unknown
	csum     uint16
	haveCsum bool
}

// next consumes the next completion when there is a new one. ok reports
// whether one was consumed; good whether it carries a frame (bad ones are
// counted and their buffers released with the others).
func (q *RxQueue) next(m *rxMeta) (ok, good bool) {
	if q.done == q.prod {
		return false, false
	}
	off := q.cq + int(q.done&(q.size-1))*CplSize
	if !EntryIsNew(q.r.Load32(off+CplPhase), q.done, q.size) {
		return false, false
	}
	c := q.r.mem[off : off+CplSize]
	i := q.done & (q.size - 1)
	q.done++
	if uint32(le.Uint16(c[CplIndex:]))&(q.size-1) != i {
		q.stats.badCpl.Add(1)
		return true, false
	}
	if c[CplStatus] != 0 {
		q.stats.devErr.Add(1)
		return true, false
	}
	n := int(le.Uint16(c[CplLen:]))
	if n > q.bufSize {
		q.stats.badCpl.Add(1)
		return true, false
	}
	if n < linkbase.HeaderLength {
		q.stats.dropped.Add(1)
		return true, false
	}
	at := q.bufs + int(i)*q.bufSize
	m.buf = q.r.mem[at : at+q.bufSize : at+q.bufSize]
	m.n = n
	m.rx = q.stamp(le.Uint32(c[CplTsNs:]), le.Uint16(c[CplTsS:]))
	m.csum = le.Uint16(c[CplRxCsum:])
	m.haveCsum = c[CplFlags]&CplFlagCsum != 0
	return true, true
}

// stamp turns a completion's time (nanoseconds, low 16 bits of the
// seconds) into Unix nanoseconds. As mqnic_read_cpl_ts does, it keeps the
// full seconds and rereads the device clock register when bits 15:8 of the
// stamp's seconds differ from them (every 256 s); unlike it, it also takes
// a stamp from just across a 2^16 s wrap of the register to the nearer
// value.
func (q *RxQueue) stamp(ns uint32, s16 uint16) int64 {
	if !q.tsValid || (q.tsSec^uint64(s16))&0xff00 != 0 {
		if sec, _, ok := q.r.DeviceClock(); ok {
			q.tsSec, q.tsValid = sec, true
		}
		if !q.tsValid {
			return 0
		}
	}
	sec := q.tsSec&^0xffff | uint64(s16)
	if sec > q.tsSec+0x8000 && sec >= 0x10000 {
		sec -= 0x10000
	} else if sec+0x8000 < q.tsSec {
		sec += 0x10000
	}
	return int64(sec)*1e9 + int64(ns)
}

// finish returns the consumed completions to the device (the CQ consumer
// pointer, mqnic_cq_write_cons_ptr) and refills the ring with the released
// buffers.
func (q *RxQueue) finish() {
	q.cqRegs.Store(RegHostPtr, q.done&PtrMask)
	if !q.borrowed {
		q.released = q.done
	}
	q.refill()
}

// sleep arms the CQ and EQ and waits for an interrupt, unless a completion
// arrived meanwhile. It drains the event queue when woken. It returns
// ErrClosed once the endpoint closes or the stack detached.
func (q *RxQueue) sleep() error {
	q.cqRegs.Store(RegArm, 1)
	q.eqRegs.Store(RegArm, 1)
	// The device stores a completion's phase, then reads the arm word; we
	// stored the arm word, now read the phase: one of us sees the other.
	if q.pending() || q.e.stopping.Load() {
		return q.drainEvents()
	}
	if err := q.wake.Wait(); err != nil {
		return ErrClosed
	}
	return q.drainEvents()
}

func (q *RxQueue) pending() bool {
	if q.done == q.prod {
		return false
	}
	off := q.cq + int(q.done&(q.size-1))*CplSize
	return EntryIsNew(q.r.Load32(off+CplPhase), q.done, q.size)
}

// drainEvents consumes the event queue: completion events only wake us;
// error events are in the registers too (Endpoint.Err). It returns
// ErrClosed when stopping, else the queue's own device error, if any.
func (q *RxQueue) drainEvents() error {
	n := 0
	for {
		off := q.eq + int(q.eqCons&(q.eqSize-1))*EventSize
		if !EntryIsNew(q.r.Load32(off+EventPhase), q.eqCons, q.eqSize) {
			break
		}
		q.eqCons++
		n++
	}
	if n > 0 {
		q.eqRegs.Store(RegHostPtr, q.eqCons&PtrMask)
	}
	if q.e.stopping.Load() {
		return ErrClosed
	}
	return q.err()
}

// err returns the device's error for this queue's RX ring or CQ.
func (q *RxQueue) err() error {
	if err := q.regs.Err(q.idx); err != nil {
		return err
	}
	return q.cqRegs.Err(2*q.idx + 1)
}

// run is the stack's RX goroutine for the queue: it delivers batches of
// frames inline, polls for SetBusyPoll's budget when the queue runs dry,
// then sleeps until an interrupt.
func (q *RxQueue) run() {
	defer q.e.wg.Done()
	defer q.state.CompareAndSwap(queueBusy, queueIdle)
	var m rxMeta
	var idleSince time.Time
	for !q.e.stopping.Load() {
		got := 0
		for got < rxBatch {
			ok, good := q.next(&m)
			if !ok {
				break
			}
			got++
			if good {
				q.deliverStack(m.buf[:m.n], m.rx, m.csum, m.haveCsum)
			}
		}
		if got > 0 {
			q.finish()
			idleSince = time.Time{}
			continue
		}
		if budget := time.Duration(q.e.busyPoll.Load()); budget > 0 {
			if idleSince.IsZero() {
				idleSince = time.Now()
				continue
			}
			if time.Since(idleSince) < budget {
				runtime.Gosched()
				continue
			}
		}
		idleSince = time.Time{}
		if err := q.sleep(); err != nil && errors.Is(err, ErrClosed) {
			return
		} else if err != nil {
			// The device stopped serving this queue: nothing more will
			// arrive on it. Wait for the stack to detach.
			for q.wake.Wait() == nil && !q.e.stopping.Load() {
			}
			return
		}
	}
}

// The states of an RxQueue: no goroutine in it, one (the stack's or a
// reader's), or closed for good.
const (
	queueIdle int32 = iota
	queueBusy
	queueClosed
)

// wait waits for a completion: it polls for SetBusyPoll's budget, then
// sleeps (sleep). It returns io.EOF once the endpoint closes, or the
// queue's device error.
func (q *RxQueue) wait() error {
	if budget := time.Duration(q.e.busyPoll.Load()); budget > 0 {
		start := time.Now()
		for !q.pending() && !q.e.stopping.Load() && time.Since(start) < budget {
			runtime.Gosched()
		}
		if q.pending() {
			return nil
		}
	}
	if err := q.sleep(); err != nil {
		if errors.Is(err, ErrClosed) {
			return io.EOF
		}
		return err
	}
	return nil
}

// acquire takes the queue for a frame-source call.
func (q *RxQueue) acquire() error {
	if q.state.CompareAndSwap(queueIdle, queueBusy) {
		return nil
	}
	if q.state.Load() == queueClosed {
		return io.EOF
	}
	return ErrInUse
}

// releaseQueue ends a frame-source call.
func (q *RxQueue) releaseQueue() { q.state.CompareAndSwap(queueBusy, queueIdle) }

// shut waits for the goroutine in the queue (woken by Close, it returns
// within a poll) and closes the queue.
func (q *RxQueue) shut() {
	for !q.state.CompareAndSwap(queueIdle, queueClosed) {
		if q.state.Load() == queueClosed {
			return
		}
		q.wake.Notify()
		time.Sleep(50 * time.Microsecond)
	}
}

// ReadFrames implements frame.Source: it copies the frames waiting on the
// queue into frames' buffers (a frame longer than its Buf is truncated, and
// WireLen says so), stamped with the device clock, and returns how many.
// When none waits it polls for the endpoint's SetBusyPoll budget, then
// sleeps until one arrives; after Close it returns
// io.EOF, and a device error for the queue (the device refused or stopped
// it) is returned as a *DeviceError. It does not allocate.
func (q *RxQueue) ReadFrames(frames []frame.Frame) (int, error) {
	if err := q.acquire(); err != nil {
		return 0, err
	}
	defer q.releaseQueue()
	var m rxMeta
	for {
		n, bytes := 0, uint64(0)
		for n < len(frames) {
			ok, good := q.next(&m)
			if !ok {
				break
			}
			if !good {
				continue
			}
			f := &frames[n]
			f.N = copy(f.Buf, m.buf[:m.n])
			f.WireLen, f.Time, f.LinkType = m.n, m.rx, frame.LinkTypeEthernet
			f.ChecksumVerified = rxVerified(m.buf[:m.n], m.csum, m.haveCsum)
			bytes += uint64(m.n)
			n++
		}
		q.count(n, bytes)
		q.finish()
		if n > 0 || len(frames) == 0 {
			return n, nil
		}
		if err := q.wait(); err != nil {
			return 0, err
		}
	}
}

// BorrowFrames is ReadFrames without the copy: it points each frame's Buf
// (replacing the caller's) at the ring buffer that holds the frame, so the
// bytes are read in place in the region. The frames, and those of earlier
// BorrowFrames calls, are valid until the next call to ReleaseBorrowed;
// until then their buffers are not given back to the device, so a reader
// that borrows without releasing empties the ring and the device drops
// (and counts) what arrives. The caller must not write the bytes. Like
// ReadFrames it sleeps when the queue is empty.
func (q *RxQueue) BorrowFrames(frames []frame.Frame) (int, error) {
	if err := q.acquire(); err != nil {
		return 0, err
	}
	defer q.releaseQueue()
	var m rxMeta
	for {
		n, bytes := 0, uint64(0)
		for n < len(frames) {
			ok, good := q.next(&m)
			if !ok {
				break
			}
			q.borrowed = true
			if !good {
				continue
			}
			f := &frames[n]
			f.Buf = m.buf[:m.n:m.n]
			f.N, f.WireLen, f.Time, f.LinkType = m.n, m.n, m.rx, frame.LinkTypeEthernet
			f.ChecksumVerified = rxVerified(f.Buf, m.csum, m.haveCsum)
			bytes += uint64(m.n)
			n++
		}
		q.count(n, bytes)
		q.finish()
		if n > 0 || len(frames) == 0 {
			return n, nil
		}
		if err := q.wait(); err != nil {
			return 0, err
		}
	}
}

// ReleaseBorrowed gives every buffer BorrowFrames handed out back to the
// device; the frames that pointed at them must no longer be used. It
// must be called from the goroutine that borrowed (not concurrently with a
// read on the queue).
func (q *RxQueue) ReleaseBorrowed() {
	if err := q.acquire(); err != nil {
		return
	}
	defer q.releaseQueue()
	q.borrowed = false
	q.released = q.done
	q.refill()
}

// count adds a batch to the counters: two atomic adds per batch, not per
// frame.
func (q *RxQueue) count(n int, bytes uint64) {
	if n > 0 {
		q.stats.frames.Add(uint64(n))
		q.stats.bytes.Add(bytes)
	}
}

// Close implements frame.Source; it closes the whole Endpoint.
func (q *RxQueue) Close() error {
	q.e.Close()
	return nil
}

// Index returns the queue's number.
func (q *RxQueue) Index() int { return q.idx }
