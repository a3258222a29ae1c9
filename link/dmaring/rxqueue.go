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

// rxRefillMin is the fewest buffers the host posts at once, as
// mqnic_refill_rx_buffers waits for 8 missing (a quarter of the ring on
// rings smaller than 32). It also batches the CQ consumer pointer, which
// is returned with each refill. Both pointers sit in cache lines the
// device reads for every frame: storing them for every frame a busy-polling
// reader takes would move those lines to the host and back each time.
const rxRefillMin = 8

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
	prod      uint32 // descriptors posted
	done      uint32 // completions consumed
	published uint32 // the CQ consumer pointer last stored (done - published < refillMin, but at a sleep)
	released  uint32 // buffers given back (prod - released <= size)
	refillMin uint32 // rxRefillMin, or a quarter of a small ring
	borrowed  bool   // frames handed out by BorrowFrames not yet released
	eqCons    uint32
	ts        stampClock

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
		refillMin: uint32(max(1, min(rxRefillMin, (1<<e.layout.RingLog)/4))),
	}
}

// refill posts every released buffer (mqnic_refill_rx_buffers) and rings
// the doorbell. Buffer i always goes with descriptor i, so a descriptor
// already holding it is left alone: rewriting it would take its cache line
// from the device, which reads it for the next frame.
func (q *RxQueue) refill() {
	target := q.released + q.size
	if q.prod == target {
		return
	}
	for ; q.prod != target; q.prod++ {
		i := int(q.prod & (q.size - 1))
		q.putDesc(q.r.mem[q.ring+i*DescSize:q.ring+(i+1)*DescSize], uint64(q.bufs+i*q.bufSize))
	}
	q.regs.Store(RegHostPtr, q.prod&PtrMask)
	// No wake-up for the device: it reads an RX ring's producer pointer
	// when a frame arrives from the wire, not when the host posts buffers.
}

// putDesc writes the RX descriptor d for the buffer at addr unless d holds
// it already.
func (q *RxQueue) putDesc(d []byte, addr uint64) {
	if le.Uint64(d[DescAddr:]) == addr && le.Uint32(d[DescLen:]) == uint32(q.bufSize) && le.Uint32(d) == 0 {
		return
	}
	PutDesc(d, 0, uint32(q.bufSize), addr)
}

// rxMeta is what a completion says about its frame.
type rxMeta struct {
	buf      []byte // the whole buffer
	n        int    // frame bytes in buf
	rx       int64  // Unix ns, 0 when unknown
	csum     uint16
	haveCsum bool
	hash     uint32 // rx_hash, when hashType is not 0
	hashType uint8  // rx_hash_type
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
	m.rx = q.ts.unix(q.r, le.Uint32(c[CplTsNs:]), le.Uint16(c[CplTsS:]))
	m.csum = le.Uint16(c[CplRxCsum:])
	m.haveCsum = c[CplFlags]&CplFlagCsum != 0
	m.hash, m.hashType = le.Uint32(c[CplRxHash:]), c[CplHashType]
	if m.hashType == 0 {
		m.hash = 0
	}
	return true, true
}

// finish releases the buffers of the frames consumed (unless borrowed),
// and once refillMin completions wait to be returned or buffers to be
// posted, or with force, returns the consumed completions to the device (the
// CQ consumer pointer, mqnic_cq_write_cons_ptr) and refills the ring with
// the released buffers. The consumer pointer goes first and the ring is
// never filled past it plus the ring size, so the device never holds a
// descriptor it has no completion room for.
func (q *RxQueue) finish(force bool) {
	if !q.borrowed {
		q.released = q.done
	}
	if !force && q.done-q.published < q.refillMin && q.released+q.size-q.prod < q.refillMin {
		return
	}
	if q.published != q.done {
		q.cqRegs.Store(RegHostPtr, q.done&PtrMask)
		q.published = q.done
	}
	q.refill()
}

// sleep arms the CQ and EQ and waits for an interrupt, unless a completion
// arrived meanwhile. It drains the event queue when woken. It returns
// ErrClosed once the endpoint closes or the stack detached.
func (q *RxQueue) sleep() error {
	// Everything back to the device first: it may fill the ring while we
	// sleep.
	q.finish(true)
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
			q.finish(false)
			continue
		}
		if q.poll() {
			continue
		}
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

// Busy polling: a reader looks at its completion queue pollSpins times
// between readings of the clock, and yields its P (runtime.Gosched) once
// per pollYield of polling, so that other goroutines (a device in this
// process, the stack's, the application's) still run when GOMAXPROCS is
// small. A yield costs a few hundred nanoseconds on the scheduler's lock,
// and a frame that arrives meanwhile waits for it: yielding on every look,
// with another goroutine doing the same, put it on most frames' path.
const (
	pollSpins = 64
	pollYield = 5 * time.Microsecond
)

// poll busy-polls the completion queue for SetBusyPoll's budget and
// reports whether a completion arrived (false at once with no budget, or
// when the endpoint stops).
func (q *RxQueue) poll() bool {
	budget := time.Duration(q.e.busyPoll.Load())
	if budget <= 0 {
		return false
	}
	start := time.Now()
	var yielded time.Duration
	for {
		for range pollSpins {
			if q.pending() {
				return true
			}
		}
		if q.e.stopping.Load() {
			return false
		}
		t := time.Since(start)
		if t >= budget {
			return q.pending()
		}
		if t-yielded >= pollYield {
			runtime.Gosched()
			yielded = t
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
	if q.poll() {
		return nil
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
			f.HashType, f.Hash = m.hashType, m.hash
			bytes += uint64(m.n)
			n++
		}
		q.count(n, bytes)
		q.finish(false)
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
			f.HashType, f.Hash = m.hashType, m.hash
			bytes += uint64(m.n)
			n++
		}
		q.count(n, bytes)
		q.finish(false)
		if n > 0 || len(frames) == 0 {
			return n, nil
		}
		if err := q.wait(); err != nil {
			return 0, err
		}
	}
}

// ReleaseBorrowed gives every buffer BorrowFrames handed out back to the
// queue; the frames that pointed at them must no longer be used. The
// buffers reach the device as every released buffer does: posted at least
// 8 at a time (a quarter of a ring smaller than 32), and all of them before
// the reader sleeps. It must be called from the goroutine that borrowed
// (not concurrently with a read on the queue).
func (q *RxQueue) ReleaseBorrowed() {
	if err := q.acquire(); err != nil {
		return
	}
	defer q.releaseQueue()
	q.borrowed = false
	q.finish(false)
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
