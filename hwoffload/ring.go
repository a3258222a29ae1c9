package hwoffload

import (
	"context"
	"runtime"
	"time"
)

// Ring is the host's consumer of one result ring. It reads slots in place,
// with no copy and no allocation, and finds the records the engine dropped
// for a full ring from the jumps in their seq. A Ring has one consumer: its
// methods must not be called concurrently.
type Ring struct {
	d       *Device
	k       int
	mem     []byte // the memory holding the slots: the region, or the card's DMA buffer
	base    int    // slot 0's offset in mem
	slots   uint32
	cons    uint32 // CONS as this consumer last stored it
	held    bool   // the slot at cons was returned and not yet released
	nextSeq uint64 // the seq due next, once seqKnown
	known   bool
	lost    uint64
	timer   *time.Timer // Wait's sleeps, made on first use
}

// Ring returns result ring k (RingTrades, RingOrders, RingEvents, RingHost);
// other k panic. The Device has one Ring per ring: every call for k returns
// the same one.
func (d *Device) Ring(k int) *Ring { return &d.rings[k] }

// sync starts consuming from the ring's CONS. The seq due is known when
// nothing was consumed yet (0), else learnt from the next record.
func (r *Ring) sync() {
	r.cons = r.d.r.Load32(RingReg(r.k, RingCons))
	r.held = false
	r.known, r.nextSeq = r.cons == 0, 0
}

// Slots returns the ring's number of slots.
func (r *Ring) Slots() int { return int(r.slots) }

// Read releases the slot the previous Read returned (storing CONS) and
// returns the next record, or ok false when the ring is empty. lost is the
// number of records the engine dropped just before this one (its seq minus
// the seq due). The Slot is valid until the next call to Read or Wait.
func (r *Ring) Read() (s Slot, lost uint64, ok bool) {
	rd := r.d.r
	if r.held {
		r.cons++
		rd.Store32(RingReg(r.k, RingCons), r.cons)
		r.held = false
	}
	prod := rd.Load32(RingReg(r.k, RingProd))
	if prod == r.cons {
		return nil, 0, false
	}
	if prod-r.cons > r.slots {
		// PROD went back: the device was reset under this consumer.
		r.sync()
		if prod = rd.Load32(RingReg(r.k, RingProd)); prod == r.cons || prod-r.cons > r.slots {
			return nil, 0, false
		}
	}
	off := r.base + int(r.cons&(r.slots-1))*SlotBytes
	s = Slot(r.mem[off : off+SlotBytes : off+SlotBytes])
	seq := s.Seq()
	if r.known && seq > r.nextSeq {
		lost = seq - r.nextSeq
		r.lost += lost
	}
	r.known, r.nextSeq = true, seq+1
	r.held = true
	return s, lost, true
}

// Wait is Read that waits for a record until ctx is done. With poll 0 it
// spins (lowest latency, one core busy), yielding the processor to other
// goroutines every spinYield empty looks so that an in-process twin is not
// starved when GOMAXPROCS is small; otherwise it sleeps poll between looks.
func (r *Ring) Wait(ctx context.Context, poll time.Duration) (Slot, uint64, error) {
	for i := 1; ; i++ {
		if s, lost, ok := r.Read(); ok {
			return s, lost, nil
		}
		if poll > 0 {
			if r.timer == nil {
				r.timer = stoppedTimer()
			}
			if err := sleepT(ctx, r.timer, poll, nil); err != nil {
				return nil, 0, err
			}
			continue
		}
		if i%spinYield == 0 {
			runtime.Gosched()
		}
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
		}
	}
}

// spinYield is the number of empty looks between two runtime.Gosched calls
// of a spinning Wait.
const spinYield = 16

// Lost returns the sum of Read's lost since the Device was opened.
func (r *Ring) Lost() uint64 { return r.lost }

// Dropped returns the ring's DROPPED register.
func (r *Ring) Dropped() uint32 { return r.d.r.Load32(RingReg(r.k, RingDropped)) }

// Pending returns the records written and not yet read (PROD - CONS).
func (r *Ring) Pending() uint32 {
	n := r.d.r.Load32(RingReg(r.k, RingProd)) - r.cons
	if r.held {
		n--
	}
	return n
}
